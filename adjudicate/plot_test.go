package adjudicate

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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
	for _, want := range []string{"seq 0: 5 positions, 1 near-tie, 3 divergences", "seq 7\n", " pos 4", " pos 5", " pos 6", "near-tie band: gap below 0.5 nats",
		"2 sequences by position: 1 with near-ties or divergences"} {
		if !strings.Contains(text, want) {
			t.Errorf("SVG text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "seq 7:") {
		t.Errorf("a clean sequence has a panel:\n%s", text)
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

// svgTexts returns the canvas width and each <text> element's x, font
// size and text.
func svgTexts(t *testing.T, doc []byte) (float64, []svgText) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	width := 0.0
	var out []svgText
	var cur *svgText
	var groups []bool // the open <g>s: rotated or not
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return width, out
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Local == "g" {
				rot := false
				for _, a := range e.Attr {
					rot = rot || a.Name.Local == "transform" && strings.Contains(a.Value, "rotate")
				}
				groups = append(groups, rot)
			}
			for _, a := range e.Attr {
				switch {
				case e.Name.Local == "svg" && a.Name.Local == "viewBox":
					f := strings.Fields(a.Value)
					width, _ = strconv.ParseFloat(f[2], 64)
				case e.Name.Local == "text" && a.Name.Local == "x":
					x, _ := strconv.ParseFloat(a.Value, 64)
					out = append(out, svgText{x: x, rotated: slices.Contains(groups, true)})
					cur = &out[len(out)-1]
				case e.Name.Local == "text" && a.Name.Local == "style" && cur != nil:
					if i := strings.Index(a.Value, "font-size:"); i >= 0 {
						fmt.Sscanf(a.Value[i+len("font-size:"):], "%gpx", &cur.size)
					}
				}
			}
		case xml.CharData:
			if cur != nil {
				cur.text += string(e)
			}
		case xml.EndElement:
			if e.Name.Local == "text" {
				cur = nil
			}
			if e.Name.Local == "g" && len(groups) > 0 {
				groups = groups[:len(groups)-1]
			}
		}
	}
}

type svgText struct {
	x, size float64
	text    string
	rotated bool // a vertical axis label (x is not across the picture)
}

// No text of the picture runs past its right edge, even drawn in a font
// a third wider than the one gonum measures with (issue 33 point 11: the
// legends were clipped); a clean sequence is a strip row, not an empty
// panel, so a hundred clean sequences make a picture of bounded height.
func TestPlotSVGNothingClipped(t *testing.T) {
	var rs []Report
	for s := range 100 {
		r := Report{Seq: s}
		for p := range 300 {
			v := Agree
			if s == 3 && p%50 == 7 {
				v = NearTie
			}
			if s == 60 && p == 299 {
				v = Far
			}
			r.Positions = append(r.Positions, Position{Pos: p, Judgement: Judgement{Verdict: v, GapNats: float64(p%7) / 10}})
		}
		rs = append(rs, r)
	}
	var buf bytes.Buffer
	if err := PlotSVG(&buf, rs, 0.5); err != nil {
		t.Fatal(err)
	}
	width, texts := svgTexts(t, buf.Bytes())
	if width == 0 || len(texts) == 0 {
		t.Fatalf("width %v, %d texts", width, len(texts))
	}
	for _, x := range texts {
		if x.rotated {
			continue
		}
		// 0.62 em a character: wider than Liberation Serif's average.
		if end := x.x + 0.62*x.size*float64(len([]rune(x.text))); x.x < 0 || end > width {
			t.Errorf("text %q from x=%.1f to about %.1f, the picture is %.1f wide", x.text, x.x, end, width)
		}
	}
	_, text := svgCheck(t, buf.Bytes())
	if n := strings.Count(text, "positions, "); n != 2 {
		t.Errorf("%d panels, want 2 (seq 3 and seq 60):\n%s", n, text)
	}
	if buf.Len() > 400<<10 {
		t.Errorf("the picture of 100 x 300 positions is %d bytes", buf.Len())
	}
}
