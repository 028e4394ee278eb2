package adjudicate

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// svgCheck parses doc as XML and returns the root element's name and the
// text of every <text> element.
func svgCheck(t *testing.T, doc []byte) (string, string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	root, inText := "", false
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not valid XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = e.Name.Local
			}
			inText = e.Name.Local == "text"
		case xml.CharData:
			if inText {
				text.Write(e)
				text.WriteByte('\n')
			}
		case xml.EndElement:
			inText = false
		}
	}
	return root, text.String()
}

func TestPlotSVG(t *testing.T) {
	rs := []Report{
		{Seq: 0, Positions: []Position{
			{Pos: 2, Judgement: Judgement{Verdict: Agree}},
			{Pos: 3, Judgement: Judgement{GapNats: 0.25, Rank: 2, Verdict: NearTie}},
			{Pos: 4, Judgement: Judgement{GapNats: 2, Rank: 9, Verdict: Divergence}},
			{Pos: 5, Judgement: Judgement{GapNats: math.Inf(1), Rank: 30, Verdict: Far}},
			{Pos: 6, Judgement: Judgement{GapNats: math.NaN(), Verdict: Divergence}},
		}},
		{Seq: 7, Positions: []Position{{Pos: 0, Judgement: Judgement{Verdict: Agree}}}},
	}
	var buf bytes.Buffer
	if err := PlotSVG(&buf, rs, 0.5); err != nil {
		t.Fatal(err)
	}
	root, text := svgCheck(t, buf.Bytes())
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	for _, want := range []string{"seq 0: 5 positions, 1 near-ties, 3 divergences", "seq 7:", " pos 4", " pos 5", " pos 6", "near-tie band (0.5 nats)"} {
		if !strings.Contains(text, want) {
			t.Errorf("SVG text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, " pos 3") {
		t.Error("a near-tie is labelled as a divergence")
	}
	var again bytes.Buffer
	if err := PlotSVG(&again, rs, 0.5); err != nil || !bytes.Equal(again.Bytes(), buf.Bytes()) {
		t.Error("two plots of the same reports differ")
	}
	if err := PlotSVG(&again, nil, 0.5); err == nil {
		t.Error("empty plot: no error")
	}
}
