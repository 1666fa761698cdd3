package bench

import (
	"bytes"
	"fmt"
	"html"
	"image/color"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The simulations' curves (one line per policy, like the FGD paper's
// figures) are drawn with gonum.org/v1/plot as SVG and inlined in the HTML
// report.

// curve is one policy's line.
type curve struct {
	policy string
	xy     plotter.XYs
}

// lineChart renders curves as an inline SVG figure.
func lineChart(b *strings.Builder, title, xlabel, ylabel, caption string, curves []curve) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	for i, c := range curves {
		if len(c.xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(c.xy)
		if err != nil {
			return fmt.Errorf("chart %s: %w", title, err)
		}
		l.Color = hexColor(colorOf(c.policy))
		l.Width = vg.Points(1.5)
		if c.policy == PolicyDrasatBinpack || strings.HasSuffix(c.policy, " upstream") { // the research report's upstream rows
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		_ = i
		p.Add(l)
		p.Legend.Add(c.policy, l)
	}
	w, err := p.WriterTo(6*vg.Inch, 3.5*vg.Inch, "svg")
	if err != nil {
		return fmt.Errorf("chart %s: %w", title, err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return fmt.Errorf("chart %s: %w", title, err)
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:] // inline: drop the XML prolog
	}
	fmt.Fprintf(b, "<figure class=\"plot\">%s<figcaption>%s</figcaption></figure>\n", svg, html.EscapeString(caption))
	return nil
}

func hexColor(s string) color.Color {
	if len(s) == 9 { // #rrggbbaa: lines are drawn opaque
		s = s[:7]
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	if err != nil || len(s) != 7 {
		return color.Gray{Y: 0x88}
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 0xff}
}

// inflationCharts: unallocated GPUs and fragmentation against the arrived
// workload, one line per policy (the FGD paper's Figure 7 and 9).
func inflationCharts(b *strings.Builder, instance string, rows []*Row) error {
	var unalloc, fragm []curve
	for _, r := range rows {
		if r.Inflation == nil {
			continue
		}
		var u, f plotter.XYs
		for _, pt := range r.Inflation.Points {
			u = append(u, plotter.XY{X: pt.ArrivedPct, Y: pt.UnallocatedPct})
			f = append(f, plotter.XY{X: pt.ArrivedPct, Y: pt.FragPct})
		}
		unalloc = append(unalloc, curve{r.Policy, u})
		fragm = append(fragm, curve{r.Policy, f})
	}
	if len(unalloc) == 0 {
		return nil
	}
	if err := lineChart(b, "Unallocated GPUs: "+instance, "arrived workload (% of cluster GPUs)", "unallocated GPUs (%)",
		"unallocated GPU share (free memory slices) after each batch, against the GPUs the arrived tasks request", unalloc); err != nil {
		return err
	}
	return lineChart(b, "Fragmentation: "+instance, "arrived workload (% of cluster GPUs)", "fragmented GPUs (%)",
		"FGD's expected fragmentation against the pod list's task shapes, in % of the cluster's GPUs", fragm)
}

// waitCharts: tasks pending over the replay with waiting, one line per
// policy.
func waitCharts(b *strings.Builder, instance string, rows []*Row) error {
	var pend []curve
	for _, r := range rows {
		if r.Replay == nil || r.Scenario != "openb-wait" {
			continue
		}
		var xy plotter.XYs
		for _, pt := range r.Replay.Pending {
			xy = append(xy, plotter.XY{X: pt.Hours, Y: pt.Value})
		}
		pend = append(pend, curve{r.Policy, xy})
	}
	if len(pend) == 0 {
		return nil
	}
	return lineChart(b, "Tasks waiting: "+instance, "replay time (h)", "tasks pending",
		"tasks waiting for admission at the end of each window (fewer is better)", pend)
}
