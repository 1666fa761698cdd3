package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"image/color"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// fpPaper are the paper's published results at 100 % arrived (10 seeds:
// median, min, max of the unallocated GPU share, %), as its artifact
// ships them (github.com/hkust-adsl/kubernetes-scheduler-simulator,
// experiments/analysis/expected_results/analysis_allo_discrete.csv),
// for the lists in the trace folder.
var fpPaper = map[string]map[string][3]float64{
	"default": {FPRandom: {13.75, 13.21, 14.13}, FPDotProd: {9.45, 9.00, 9.66}, FPClustering: {8.42, 7.25, 9.38},
		FPPacking: {8.20, 7.42, 8.93}, FPBestFit: {7.09, 6.96, 7.36}, FPFGD: {4.77, 4.62, 4.94}},
	"gpushare40": {FPRandom: {15.04, 14.75, 15.72}, FPDotProd: {10.66, 10.46, 10.91}, FPClustering: {10.18, 9.43, 11.60},
		FPPacking: {10.19, 9.52, 11.30}, FPBestFit: {8.53, 8.28, 9.05}, FPFGD: {6.05, 5.92, 6.18}},
	"gpushare100": {FPRandom: {21.07, 20.90, 21.38}, FPDotProd: {17.93, 17.67, 18.60}, FPClustering: {17.70, 16.99, 18.88},
		FPPacking: {17.78, 17.17, 18.96}, FPBestFit: {15.40, 15.00, 15.65}, FPFGD: {13.36, 13.09, 13.62}},
	"gpuspec10": {FPRandom: {13.69, 13.41, 14.33}, FPDotProd: {9.75, 9.32, 10.36}, FPClustering: {8.05, 7.21, 9.19},
		FPPacking: {7.77, 6.92, 8.99}, FPBestFit: {6.88, 6.54, 7.24}, FPFGD: {5.30, 5.08, 5.68}},
	"multigpu20": {FPRandom: {13.16, 12.11, 13.84}, FPDotProd: {8.19, 7.57, 8.54}, FPClustering: {6.62, 5.75, 7.46},
		FPPacking: {6.49, 5.65, 7.34}, FPBestFit: {6.27, 5.88, 6.65}, FPFGD: {4.47, 4.18, 4.68}},
	"multigpu50": {FPRandom: {18.61, 17.44, 20.05}, FPDotProd: {5.24, 4.94, 5.60}, FPClustering: {4.36, 3.92, 4.69},
		FPPacking: {3.93, 3.59, 4.52}, FPBestFit: {4.42, 4.10, 4.59}, FPFGD: {2.91, 2.73, 3.13}},
	"cpu100": {FPRandom: {12.56, 12.11, 13.14}, FPDotProd: {8.22, 8.04, 8.87}, FPClustering: {7.46, 7.15, 8.36},
		FPPacking: {7.45, 7.02, 8.17}, FPBestFit: {6.72, 6.55, 6.94}, FPFGD: {4.79, 4.59, 5.03}},
}

// PaperAt100 returns the paper's median, min and max at 100 % for a list
// and policy, if published.
func PaperAt100(list, policy string) ([3]float64, bool) {
	v, ok := fpPaper[list][policy]
	return v, ok
}

func fpCell(p FPPoint) string {
	if math.IsNaN(p.Median) {
		return "-"
	}
	return fmt.Sprintf("%.2f [%.2f–%.2f]", p.Median, p.Min, p.Max)
}

// WriteFPTable prints, per list, each policy's unallocated GPU share at
// the FGDPaperLevels (median [min–max] over the seeds), the paper's value
// at 100 %, the placements and the time per curve.
func WriteFPTable(w io.Writer, rep *FPReport) error {
	fmt.Fprintf(w, "fgd-paper: %d nodes, %d GPUs; tasks arrive until %.0f %% of the GPUs are requested; %d seed(s) %d..%d\n",
		rep.Nodes, rep.GPUs, 100*rep.Ratio, len(rep.Seeds), rep.Seeds[0], rep.Seeds[len(rep.Seeds)-1])
	fmt.Fprintf(w, "unallocated GPUs, %% of the cluster's: median [min–max] over the seeds, at each arrived workload (%% of the cluster's GPUs)\n")
	if rep.Interrupted {
		fmt.Fprintf(w, "INTERRUPTED: only the lists and policies whose every seed finished\n")
	}
	var list string
	var tw *tabwriter.Writer
	var ofList []*FPResult
	flush := func() {
		if tw != nil {
			tw.Flush()
			writeFPVersus(w, ofList)
		}
		ofList = nil
	}
	for _, r := range rep.Results {
		if r.List != list {
			flush()
			list = r.List
			fmt.Fprintf(w, "\nlist %s\n", list)
			tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprint(tw, "policy")
			for _, l := range FGDPaperLevels {
				fmt.Fprintf(tw, "\t%d %%", l)
			}
			fmt.Fprint(tw, "\tpaper at 100 %\ttasks placed / arrived\ts per curve\tchecked\n")
		}
		ofList = append(ofList, r)
		fmt.Fprint(tw, r.Policy)
		for _, l := range FGDPaperLevels {
			fmt.Fprintf(tw, "\t%s", fpCell(r.At(l)))
		}
		paper := "-"
		if v, ok := PaperAt100(r.List, r.Policy); ok {
			paper = fmt.Sprintf("%.2f [%.2f–%.2f]", v[0], v[1], v[2])
		}
		checked := "-"
		if r.Verified {
			checked = "yes"
		}
		fmt.Fprintf(tw, "\t%s\t%d / %d\t%.2f\t%s\n", paper, r.Placed, r.Arrivals, r.WallS, checked)
	}
	flush()
	fmt.Fprintf(w, "\n%s/%s, %d CPUs, %s; peak RSS %.0f MiB\n", rep.Machine.GOOS, rep.Machine.GOARCH, rep.Machine.CPUs, rep.Machine.GoVersion, rep.MaxRSSMiB)
	return nil
}

// writeFPVersus writes, for a list drasat ran on, how its curve compares
// with each other policy's at every level: the difference of the medians
// in points (negative: drasat leaves fewer GPUs unallocated) and, seed
// by seed (a seed's arrivals are the same for every policy), on how many
// seeds drasat is below, level with and above it. Where no policy turns
// a task away yet (80 % and 90 % on most lists) every policy's share is
// what has not arrived, and all are level.
func writeFPVersus(w io.Writer, results []*FPResult) {
	var d *FPResult
	for _, r := range results {
		if r.Policy == FPDrasat {
			d = r
		}
	}
	if d == nil || len(results) < 2 || len(d.PerSeedAtLevels) != len(FGDPaperLevels) {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "drasat against")
	for _, l := range FGDPaperLevels {
		fmt.Fprintf(tw, "\t%d %%", l)
	}
	fmt.Fprintln(tw, "\t(median difference, points; seeds below / level / above)")
	for _, r := range results {
		if r == d || len(r.PerSeedAtLevels) != len(FGDPaperLevels) {
			continue
		}
		fmt.Fprint(tw, r.Policy)
		for i, l := range FGDPaperLevels {
			var below, level, above int
			for k, v := range d.PerSeedAtLevels[i] {
				if k >= len(r.PerSeedAtLevels[i]) {
					break
				}
				x, y := float64(v), float64(r.PerSeedAtLevels[i][k])
				switch {
				case math.IsNaN(x) || math.IsNaN(y):
				case x < y-fpLevel:
					below++
				case x > y+fpLevel:
					above++
				default:
					level++
				}
			}
			fmt.Fprintf(tw, "\t%+.2f (%d/%d/%d)", d.At(l).Median-r.At(l).Median, below, level, above)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// fpLevel: shares closer than this (in %) are level; a milli-GPU of the
// whole cluster is 1.6e-5 %.
const fpLevel = 1e-6

// WriteFPJSON writes the report as JSON.
func WriteFPJSON(w io.Writer, rep *FPReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteFPTurnedAway writes the tasks each policy turned away as
// tab-separated values, one task a line (a run with
// FGDPaperConfig.TurnedAway).
func WriteFPTurnedAway(w io.Writer, rep *FPReport) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "list\tpolicy\tseed\tarrival\ttask\tarrived_pct\tgpus\tmilli_gpu\tcpu_milli\tmemory_mib\tgpu_models")
	for _, r := range rep.Results {
		for _, t := range r.TurnedAway {
			models := strings.Join(t.Models, ",")
			if models == "" {
				models = "any"
			}
			fmt.Fprintf(bw, "%s\t%s\t%d\t%d\t%s\t%.2f\t%d\t%d\t%d\t%d\t%s\n", r.List, r.Policy, t.Seed, t.Arrival, t.Task, t.ArrivedPct, t.GPUs, t.MilliGPU, t.CPUMilli, t.MemMiB, models)
		}
	}
	return bw.Flush()
}

// fpColors: one colour per policy, the paper's order.
var fpColors = map[string]color.RGBA{
	FPRandom:        {0x8c, 0x56, 0x4b, 0xff},
	FPDotProd:       {0x94, 0x67, 0xbd, 0xff},
	FPClustering:    {0xd6, 0x27, 0x28, 0xff},
	FPPacking:       {0x2c, 0xa0, 0x2c, 0xff},
	FPBestFit:       {0xff, 0x7f, 0x0e, 0xff},
	FPFGD:           {0x1f, 0x77, 0xb4, 0xff},
	FPDrasat:        {0x00, 0x00, 0x00, 0xff},
	FPDrasatBinpack: {0x7f, 0x7f, 0x7f, 0xff},
	FPFirstFit:      {0xbc, 0xbd, 0x22, 0xff},
	FPUpstream:      {0x17, 0xbe, 0xcf, 0xff},
}

// fpFigure draws one list's curves in the paper's style (its Figure 7):
// unallocated GPUs against arrived workload, the median over the seeds as
// a line and min–max as a band, the ideal (everything arrived is
// allocated) dotted; x from xmin, y up to ymax.
func fpFigure(list string, rs []*FPResult, xmin, ymax float64, format string) (string, error) {
	p := plot.New()
	p.Title.Text = "Unallocated GPUs, list " + list
	p.X.Label.Text = "arrived workload (% of cluster GPU capacity)"
	p.Y.Label.Text = "unallocated GPU (%)"
	p.X.Min, p.Y.Min, p.Y.Max = xmin, 0, ymax
	p.X.Max = 130
	p.X.Tick.Marker = fpTicks(xmin, 130, 10)
	p.Y.Tick.Marker = fpTicks(0, ymax, ymax/5)
	p.Add(plotter.NewGrid())
	ideal, err := plotter.NewLine(plotter.XYs{{X: xmin, Y: 100 - xmin}, {X: 100, Y: 0}, {X: 130, Y: 0}})
	if err != nil {
		return "", err
	}
	ideal.Color = color.Gray{Y: 0x80}
	ideal.Dashes = []vg.Length{vg.Points(1), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add("ideal", ideal)
	for _, r := range rs {
		var mid, band plotter.XYs
		var lo plotter.XYs
		for _, pt := range r.Curve {
			if float64(pt.Arrived) < xmin {
				continue
			}
			mid = append(mid, plotter.XY{X: float64(pt.Arrived), Y: math.Min(pt.Median, ymax)})
			band = append(band, plotter.XY{X: float64(pt.Arrived), Y: math.Min(pt.Max, ymax)})
			lo = append(lo, plotter.XY{X: float64(pt.Arrived), Y: math.Min(pt.Min, ymax)})
		}
		if len(mid) < 2 {
			continue
		}
		for i := len(lo) - 1; i >= 0; i-- {
			band = append(band, lo[i])
		}
		c, ok := fpColors[r.Policy]
		if !ok {
			c = color.RGBA{0x55, 0x55, 0x55, 0xff}
		}
		poly, err := plotter.NewPolygon(band)
		if err != nil {
			return "", err
		}
		poly.Color = color.RGBA{c.R / 4, c.G / 4, c.B / 4, 0x40}
		poly.LineStyle.Width = 0
		p.Add(poly)
		l, err := plotter.NewLine(mid)
		if err != nil {
			return "", err
		}
		l.Color, l.Width = c, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.Policy, l)
	}
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(4)
	p.Legend.TextStyle.XAlign = draw.XRight
	w, err := p.WriterTo(7*vg.Inch, 3.5*vg.Inch, format)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return "", err
	}
	svg := buf.String()
	if i := strings.Index(svg, "<svg"); i > 0 {
		svg = svg[i:]
	}
	return svg, nil
}

// fpTicks labels every step from lo to hi with whole numbers.
func fpTicks(lo, hi, step float64) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for v := lo; v <= hi+1e-9; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%.0f", v)})
	}
	return ts
}

// WriteFPHTML writes a self-contained page: per list the figure (the
// paper's zoom, 75–130 % arrived, and the whole run) and the table.
func WriteFPHTML(w io.Writer, rep *FPReport) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>drasat bench -s fgd-paper</title>" +
		"<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child{text-align:left}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>The FGD paper's experiment on DRA</h1>\n<p>%d nodes, %d GPUs; tasks arrive until %.0f %% of the GPUs are requested; %d seed(s) from %d. Lines: median over the seeds; bands: min–max. %s/%s, %d CPUs, %s.</p>\n",
		rep.Nodes, rep.GPUs, 100*rep.Ratio, len(rep.Seeds), rep.Seeds[0], html.EscapeString(rep.Machine.GOOS), html.EscapeString(rep.Machine.GOARCH), rep.Machine.CPUs, html.EscapeString(rep.Machine.GoVersion))
	lists, by := groupInOrder(rep.Results, func(r *FPResult) string { return r.List })
	for _, l := range lists {
		fmt.Fprintf(&b, "<h2>List %s</h2>\n", html.EscapeString(l))
		for _, z := range [][2]float64{{75, 25}, {0, 100}} {
			svg, err := fpFigure(l, by[l], z[0], z[1], "svg")
			if err != nil {
				return fmt.Errorf("figure %s: %w", l, err)
			}
			b.WriteString("<figure>" + svg + "</figure>\n")
		}
		b.WriteString("<table><tr><th>policy</th>")
		for _, lv := range FGDPaperLevels {
			fmt.Fprintf(&b, "<th>%d %%</th>", lv)
		}
		b.WriteString("<th>paper at 100 %</th></tr>\n")
		for _, r := range by[l] {
			fmt.Fprintf(&b, "<tr><td>%s</td>", html.EscapeString(r.Policy))
			for _, lv := range FGDPaperLevels {
				fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(fpCell(r.At(lv))))
			}
			paper := "-"
			if v, ok := PaperAt100(r.List, r.Policy); ok {
				paper = fmt.Sprintf("%.2f [%.2f–%.2f]", v[0], v[1], v[2])
			}
			fmt.Fprintf(&b, "<td>%s</td></tr>\n", html.EscapeString(paper))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
