package adjudicate

import (
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Plot colours.
var (
	bandFill   = color.RGBA{R: 0xc8, G: 0xe6, B: 0xc9, A: 0xff}
	gapColor   = color.RGBA{R: 0x33, G: 0x55, B: 0x99, A: 0xff}
	tieColor   = color.RGBA{R: 0xe0, G: 0x90, B: 0x00, A: 0xff}
	divergeRed = color.RGBA{R: 0xd0, G: 0x10, B: 0x10, A: 0xff}
	agreeFill  = color.RGBA{R: 0xdd, G: 0xe8, B: 0xdd, A: 0xff}
)

// Layout of the picture.
const (
	plotWidth = 8 * vg.Inch
	panelH    = 2.6 * vg.Inch
	legendH   = 0.55 * vg.Inch
	// maxPanels bounds the detail panels: sequences past it are in the
	// strip only.
	maxPanels = 8
	// stripRowH is the strip's height per sequence (up to stripMaxH).
	stripRowH = 0.22 * vg.Inch
	stripMaxH = 5 * vg.Inch
	stripPadH = 1.1 * vg.Inch // title, axis and tick labels
	// maxStripLabels: with more sequences, every k-th row is labelled.
	maxStripLabels = 24
)

// PlotSVG writes an SVG picture of the reports: on top a heat strip, one
// row per sequence and one column per position, coloured by verdict
// (agree, near-tie, divergence), so every sequence is seen at once however
// many there are; under it one legend for the whole picture; then a panel
// for each of the first maxPanels sequences that has a near-tie or a
// divergence (a clean sequence is all in its strip row): the gap of our
// token (nats) over positions, the near-tie band shaded, near-ties marked
// by circles and divergences by red crosses labelled with their position.
// Infinite and unknown gaps are drawn at the top of the panel. band is the
// band in nats (0: DefaultBand).
func PlotSVG(w io.Writer, reports []Report, band float64) error {
	if band == 0 {
		band = DefaultBand
	}
	if len(reports) == 0 {
		return fmt.Errorf("adjudicate: nothing to plot")
	}
	var detail []*Report
	notable := 0
	for i := range reports {
		if reports[i].Count(NearTie)+reports[i].Count(Divergence)+reports[i].Count(Far) > 0 {
			notable++
			if len(detail) < maxPanels {
				detail = append(detail, &reports[i])
			}
		}
	}
	stripH := min(stripPadH+stripRowH*vg.Length(len(reports)), stripMaxH)
	height := stripH + legendH + panelH*vg.Length(len(detail))
	c := vgsvg.New(plotWidth, height)
	dc := draw.New(c)
	top := dc.Max.Y

	strip, err := heatStripPlot(reports, notable, len(detail))
	if err != nil {
		return err
	}
	strip.Draw(draw.Crop(dc, 0, 0, top-stripH-dc.Min.Y, 0))
	drawLegend(draw.Crop(dc, 0, 0, top-stripH-legendH-dc.Min.Y, -stripH), band)

	if len(detail) > 0 {
		plots := make([][]*plot.Plot, len(detail))
		for i, r := range detail {
			p, err := panel(r, band)
			if err != nil {
				return err
			}
			plots[i] = []*plot.Plot{p}
		}
		area := draw.Crop(dc, 0, 0, 0, -(stripH + legendH))
		tiles := draw.Tiles{Rows: len(detail), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
		canvases := plot.Align(plots, tiles, area)
		for i := range plots {
			plots[i][0].Draw(canvases[i][0])
		}
	}
	_, err = c.WriteTo(w)
	return err
}

// verdictColor is the strip's colour of a position.
func verdictColor(v Verdict) color.Color {
	switch {
	case v == NearTie:
		return tieColor
	case v.Bad():
		return divergeRed
	}
	return agreeFill
}

// heatStrip draws one row per sequence (the first on top): each run of
// positions with the same verdict is one rectangle.
type heatStrip struct{ reports []Report }

func (h heatStrip) row(i int) float64 { return float64(len(h.reports) - 1 - i) }

func (h heatStrip) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, r := range h.reports {
		y0, y1 := trY(h.row(i)-0.42), trY(h.row(i)+0.42)
		for a := 0; a < len(r.Positions); {
			b := a
			for b+1 < len(r.Positions) && verdictColor(r.Positions[b+1].Verdict) == verdictColor(r.Positions[a].Verdict) &&
				r.Positions[b+1].Pos == r.Positions[b].Pos+1 {
				b++
			}
			x0, x1 := trX(float64(r.Positions[a].Pos)-0.5), trX(float64(r.Positions[b].Pos)+0.5)
			c.FillPolygon(verdictColor(r.Positions[a].Verdict), c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
			a = b + 1
		}
	}
}

func (h heatStrip) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = math.Inf(1), math.Inf(-1)
	for _, r := range h.reports {
		if n := len(r.Positions); n > 0 {
			xmin, xmax = min(xmin, float64(r.Positions[0].Pos)), max(xmax, float64(r.Positions[n-1].Pos))
		}
	}
	if xmin > xmax {
		xmin, xmax = 0, 1
	}
	return xmin - 0.5, xmax + 0.5, -0.5, float64(len(h.reports)) - 0.5
}

func heatStripPlot(reports []Report, notable, panels int) (*plot.Plot, error) {
	p := plot.New()
	h := heatStrip{reports}
	p.Add(h)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = h.DataRange()
	p.X.Label.Text = "position"
	p.Title.Text = fmt.Sprintf("%d %s by position: %d with near-ties or divergences", len(reports), plotPlural(len(reports), "sequence"), notable)
	if notable > panels {
		p.Title.Text += fmt.Sprintf(" (the first %d drawn below)", panels)
	} else if notable > 0 {
		p.Title.Text += " (drawn below)"
	}
	step := (len(reports) + maxStripLabels - 1) / maxStripLabels
	var ticks []plot.Tick
	for i, r := range reports {
		t := plot.Tick{Value: h.row(i)}
		if i%step == 0 {
			t.Label = fmt.Sprintf("seq %d", r.Seq)
		}
		ticks = append(ticks, t)
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Length = 0
	return p, nil
}

// drawLegend is the one legend of the picture, left to right from the
// left edge, wrapped onto a second line rather than past the right edge.
// Text is measured with gonum's font and given a third more room: an SVG
// viewer may draw it in a wider font.
func drawLegend(c draw.Canvas, band float64) {
	sty := draw.TextStyle{Color: color.Black, Font: plot.DefaultFont, Handler: plot.DefaultTextHandler, YAlign: draw.YCenter}
	sty.Font.Size = vg.Points(10)
	fe := plot.DefaultTextHandler.Cache().Lookup(sty.Font, sty.Font.Size)
	lineH := (c.Max.Y - c.Min.Y) / 2
	y := c.Max.Y - lineH/2
	x := c.Min.X + vg.Points(8)
	sw := vg.Points(10)
	for _, it := range []struct {
		col  color.Color
		text string
	}{
		{agreeFill, "agree"},
		{tieColor, "near-tie (circle)"},
		{divergeRed, "divergence (cross)"},
		{bandFill, fmt.Sprintf("near-tie band: gap below %.3g nats", band)},
		{gapColor, "gap of our token"},
	} {
		need := sw + vg.Points(4) + fe.Width(it.text)*4/3 + vg.Points(14)
		if x+need > c.Max.X && x > c.Min.X+vg.Points(8) {
			x, y = c.Min.X+vg.Points(8), y-lineH
		}
		c.FillPolygon(it.col, []vg.Point{{X: x, Y: y - sw/2}, {X: x + sw, Y: y - sw/2}, {X: x + sw, Y: y + sw/2}, {X: x, Y: y + sw/2}})
		c.FillText(sty, vg.Point{X: x + sw + vg.Points(4), Y: y}, it.text)
		x += need
	}
}

func plotPlural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// panel is the plot of one sequence.
func panel(r *Report, band float64) (*plot.Plot, error) {
	p := plot.New()
	ties, bad := r.Count(NearTie), r.Count(Divergence)+r.Count(Far)
	p.Title.Text = fmt.Sprintf("seq %d: %d %s, %d %s, %d %s", r.Seq, len(r.Positions), plotPlural(len(r.Positions), "position"),
		ties, plotPlural(ties, "near-tie"), bad, plotPlural(bad, "divergence"))
	p.X.Label.Text = "position"
	p.Y.Label.Text = "gap of our token (nats)"
	// The top of the panel: the largest finite gap, at least twice the band.
	top := 2 * band
	for _, q := range r.Positions {
		if g := q.GapNats; !math.IsInf(g, 0) && !math.IsNaN(g) {
			top = max(top, g*1.05)
		}
	}
	x0, x1 := 0.0, 1.0
	if n := len(r.Positions); n > 0 {
		x0, x1 = float64(r.Positions[0].Pos), float64(r.Positions[n-1].Pos)
		if x1 == x0 {
			x0, x1 = x0-0.5, x1+0.5
		}
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = x0, x1, 0, top

	shade, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: 0}, {X: x1, Y: 0}, {X: x1, Y: band}, {X: x0, Y: band}})
	if err != nil {
		return nil, err
	}
	shade.Color = bandFill
	shade.LineStyle.Width = 0
	p.Add(shade)

	var line, tiePts, divs plotter.XYs
	var labels plotter.XYLabels
	for _, q := range r.Positions {
		g := q.GapNats
		if math.IsInf(g, 0) || math.IsNaN(g) {
			g = top
		}
		pt := plotter.XY{X: float64(q.Pos), Y: g}
		line = append(line, pt)
		switch {
		case q.Verdict == NearTie:
			tiePts = append(tiePts, pt)
		case q.Verdict.Bad():
			divs = append(divs, pt)
			labels.XYs = append(labels.XYs, pt)
			labels.Labels = append(labels.Labels, fmt.Sprintf(" pos %d", q.Pos))
		}
	}
	if len(line) > 0 {
		l, err := plotter.NewLine(line)
		if err != nil {
			return nil, err
		}
		l.Color = gapColor
		p.Add(l)
	}
	if len(tiePts) > 0 {
		s, err := plotter.NewScatter(tiePts)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: tieColor, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		p.Add(s)
	}
	if len(divs) > 0 {
		s, err := plotter.NewScatter(divs)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: divergeRed, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}
		p.Add(s)
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Color = divergeRed
		}
		p.Add(lb)
	}
	return p, nil
}
