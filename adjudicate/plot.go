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
)

// PlotSVG writes an SVG picture of the reports: one panel per sequence,
// the gap of our token (nats) over positions, the near-tie band shaded,
// near-ties marked by circles and divergences by red crosses labelled with
// their position. Infinite and unknown gaps are drawn at the top of the
// panel. band is the band in nats (0: DefaultBand).
func PlotSVG(w io.Writer, reports []Report, band float64) error {
	if band == 0 {
		band = DefaultBand
	}
	if len(reports) == 0 {
		return fmt.Errorf("adjudicate: nothing to plot")
	}
	plots := make([][]*plot.Plot, len(reports))
	for i := range reports {
		p, err := panel(&reports[i], band)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	const panelH = 3 * vg.Inch
	c := vgsvg.New(8*vg.Inch, panelH*vg.Length(len(reports)))
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(reports), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err := c.WriteTo(w)
	return err
}

// panel is the plot of one sequence.
func panel(r *Report, band float64) (*plot.Plot, error) {
	p := plot.New()
	title := fmt.Sprintf("seq %d: %d positions, %d near-ties, %d divergences", r.Seq, len(r.Positions), r.Count(NearTie), r.Count(Divergence)+r.Count(Far))
	p.Title.Text = title
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
	p.Legend.Add(fmt.Sprintf("near-tie band (%.3g nats)", band), shade)

	var line, ties, divs plotter.XYs
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
			ties = append(ties, pt)
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
		p.Legend.Add("gap", l)
	}
	if len(ties) > 0 {
		s, err := plotter.NewScatter(ties)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: tieColor, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
		p.Add(s)
		p.Legend.Add("near-tie", s)
	}
	if len(divs) > 0 {
		s, err := plotter.NewScatter(divs)
		if err != nil {
			return nil, err
		}
		s.GlyphStyle = draw.GlyphStyle{Color: divergeRed, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}
		p.Add(s)
		p.Legend.Add("divergence", s)
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return nil, err
		}
		for i := range lb.TextStyle {
			lb.TextStyle[i].Color = divergeRed
		}
		p.Add(lb)
	}
	p.Legend.Top = true
	return p, nil
}
