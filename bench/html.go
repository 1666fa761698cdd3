package bench

import (
	"fmt"
	"github.com/drasat/drasat/bench/gen"
	"hash/fnv"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

var policyColor = map[string]string{
	PolicyUpstream:      "#6b6b6b",
	PolicyFirstFit:      "#e6862b",
	PolicyFFD:           "#c9b92a",
	PolicyBestFit:       "#8e5ab5",
	PolicyFGD:           "#2ca05a",
	PolicyDrasatBinpack: "#7fa7d9",
	PolicyDrasat:        "#2366b5",
}

func colorOf(policy string) string {
	if c, ok := policyColor[policy]; ok {
		return c
	}
	return "#888"
}

const htmlHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>drasat bench</title>
<style>
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ddd; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 1em 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; }
figure { margin: 0; } figcaption { font-size: 0.85em; color: #555; }
svg text { font-family: inherit; }
.note { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
`

// groupInOrder groups xs by key, the keys in the order they first
// appear.
func groupInOrder[T any](xs []T, key func(T) string) ([]string, map[string][]T) {
	var keys []string
	by := map[string][]T{}
	for _, x := range xs {
		k := key(x)
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], x)
	}
	return keys, by
}

// WriteHTML writes the report as a self-contained HTML page with inline
// SVG charts: admitted claims per policy for every instance, time against
// size per scenario, whole GPUs free over the openb replay, and for small
// MIG instances a per-GPU memory-slice picture of each policy's placement.
func WriteHTML(w io.Writer, rep *Report) error {
	var b strings.Builder
	b.WriteString(htmlHead)
	fmt.Fprintf(&b, "<h1>drasat bench</h1>\n<p class=\"note\">seed %d, median of %d run(s), drasat budget %gs per batch; %s/%s, %d CPUs, %s; peak RSS %.0f MiB. Every allocation of every policy was validated by the independent feasibility checker.</p>\n",
		rep.Seed, rep.Repeat, rep.TimeoutS, html.EscapeString(rep.Machine.GOOS), html.EscapeString(rep.Machine.GOARCH), rep.Machine.CPUs, html.EscapeString(rep.Machine.GoVersion), rep.MaxRSSMiB)
	b.WriteString("<p>")
	for _, p := range Policies {
		fmt.Fprintf(&b, `<svg width="12" height="12" role="img" aria-label="%s"><rect width="12" height="12" fill="%s"/></svg> %s &#160; `, p, colorOf(p), p)
	}
	b.WriteString("</p>\n")

	// Group rows by scenario, then instance, keeping order.
	scenarios, byScenario := groupInOrder(rep.Rows, func(r *Row) string { return r.Scenario })
	for _, sc := range scenarios {
		rows := byScenario[sc]
		fmt.Fprintf(&b, "<h2>%s</h2>\n", html.EscapeString(sc))
		writeRowTable(&b, rows)
		if sc == "research" {
			if err := writeResearchHTML(&b, rows); err != nil { // research.go
				return err
			}
		}
		instances, byInst := groupInOrder(rows, func(r *Row) string { return r.Instance })
		b.WriteString("<div class=\"charts\">\n")
		for _, in := range instances {
			admittedChart(&b, in, byInst[in])
		}
		if len(instances) > 1 && sc != "openb" && sc != "openb-wait" && sc != "inflation" && sc != "research" {
			timeChart(&b, sc, rows)
		}
		for _, in := range instances {
			for _, r := range byInst[in] {
				if r.Replay != nil {
					freeChart(&b, in, byInst[in])
					break
				}
			}
			if err := inflationCharts(&b, in, byInst[in]); err != nil {
				return err
			}
			if err := waitCharts(&b, in, byInst[in]); err != nil {
				return err
			}
		}
		b.WriteString("</div>\n")
		for _, in := range instances {
			if len(byInst[in]) > 0 && byInst[in][0].Picture != nil {
				fmt.Fprintf(&b, "<h3>Placements on %s</h3>\n<p class=\"note\">One row per GPU, one cell per memory slice (as in KEP-4815's diagrams); hatched grey cells were in use before the batch, coloured blocks are this batch's devices, labelled with their MIG profile; white is free. %s</p>\n<div class=\"charts\">\n", html.EscapeString(in), profileLegend(pictureModels(byInst[in][0].Picture)))
				for _, r := range byInst[in] {
					pictureChart(&b, r)
				}
				b.WriteString("</div>\n")
			}
		}
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRowTable(b *strings.Builder, rows []*Row) {
	b.WriteString("<table>\n<tr><th class=\"l\">instance</th><th class=\"l\">policy</th><th>admitted</th><th>%</th><th>devices</th><th>used</th><th>free</th><th>utilisation</th><th>time</th><th>heap MiB</th><th class=\"l\">optimal / gap</th></tr>\n")
	for _, r := range rows {
		opt := ""
		if r.Optimal != nil {
			if *r.Optimal {
				opt = "optimal"
			} else {
				opt = fmt.Sprintf("gap %.1f%% (bound %d)", 100**r.Gap, *r.Bound)
			}
		}
		if r.Replay != nil && isDrasat(r.Policy) {
			opt = fmt.Sprintf("%d/%d windows optimal", r.Replay.OptimalWindows, r.Replay.Windows)
		}
		fmt.Fprintf(b, "<tr><td class=\"l\">%s</td><td class=\"l\">%s</td><td>%d/%d</td><td>%.1f</td><td>%d</td><td>%d %s</td><td>%d</td><td>%.1f%% %s</td><td>%s</td><td>%.1f</td><td class=\"l\">%s</td></tr>\n",
			html.EscapeString(r.Instance), html.EscapeString(r.Policy), r.Admitted, r.Claims, r.AdmittedPct, r.Devices,
			r.UnitsUsed, html.EscapeString(r.UnitName), r.UnitsFree, 100*r.Util, html.EscapeString(r.UtilName), fmtMs(r.WallMs), r.PeakHeapMiB, opt)
	}
	b.WriteString("</table>\n")
	for _, r := range rows {
		if r.Replay != nil {
			fmt.Fprintf(b, "<p class=\"note\">%s: %d/%d tasks admitted over %d windows, %.1f GPU-hours stranded, whole GPUs free: mean %.1f, minimum %d of %d.</p>\n",
				html.EscapeString(r.Policy), r.Admitted, r.Claims, r.Replay.Windows, r.Replay.StrandedGPUHours, r.Replay.MeanFreeGPUs, r.Replay.MinFreeGPUs, r.Replay.GPUs)
			if r.Scenario == "openb-wait" {
				fmt.Fprintf(b, "<p class=\"note\">%s: wait mean %.0f s, p99 %.0f s; %d dropped after the maximum wait, %d never admitted.</p>\n",
					html.EscapeString(r.Policy), r.Replay.MeanWaitS, r.Replay.P99WaitS, r.Replay.Dropped, r.Replay.Unplaced)
			}
		}
		if in := r.Inflation; in != nil {
			fmt.Fprintf(b, "<p class=\"note\">%s: %d/%d tasks admitted; at %.0f%% arrived workload %.1f%% of the GPUs unallocated, %.1f%% fragmented.</p>\n",
				html.EscapeString(r.Policy), r.Admitted, r.Claims, in.At100.ArrivedPct, in.At100.UnallocatedPct, in.At100.FragPct)
		}
	}
}

// admittedChart: one horizontal bar per policy.
func admittedChart(b *strings.Builder, instance string, rows []*Row) {
	const width, barH, left, right = 420, 22, 150, 70
	height := 30 + len(rows)*(barH+6) + 20
	max := 0
	for _, r := range rows {
		if r.Claims > max {
			max = r.Claims
		}
	}
	if max == 0 {
		max = 1
	}
	fmt.Fprintf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart admitted\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	fmt.Fprintf(b, "<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\">Admitted: %s</text>\n", html.EscapeString(instance))
	scale := float64(width-left-right) / float64(max)
	for i, r := range rows {
		y := 30 + i*(barH+6)
		fmt.Fprintf(b, "<g data-policy=\"%s\"><text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"end\">%s</text>", html.EscapeString(r.Policy), left-6, y+15, html.EscapeString(r.Policy))
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"/>", left, y, float64(r.Admitted)*scale, barH, colorOf(r.Policy))
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"12\">%d (%.0f%%)</text></g>\n", float64(left)+float64(r.Admitted)*scale+4, y+15, r.Admitted, r.AdmittedPct)
		if r.Bound != nil && !*r.Optimal {
			x := float64(left) + float64(*r.Bound)*scale
			fmt.Fprintf(b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#000\" stroke-dasharray=\"3,2\"><title>proven bound %d</title></line>\n", x, x, y-2, y+barH+2, *r.Bound)
		}
	}
	// Axis: total pending claims.
	y := 30 + len(rows)*(barH+6)
	fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#999\"/>", left, width-right, y, y)
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"end\" fill=\"#555\">%d pending</text>\n", width-right, y+14, max)
	b.WriteString("</svg><figcaption>claims admitted per policy")
	for _, r := range rows {
		if r.Bound != nil && !*r.Optimal {
			b.WriteString("; dashed: drasat's proven upper bound")
			break
		}
	}
	b.WriteString("</figcaption></figure>\n")
}

// timeChart: wall time against pending claims, log scale, one line per
// policy (and compat for modes).
func timeChart(b *strings.Builder, scenario string, rows []*Row) {
	const width, height, left, bottom, top, right = 460, 280, 60, 40, 30, 150
	type pt struct{ x, y float64 }
	series := map[string][]pt{}
	var names []string
	minX, maxX, minY, maxY := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		name := r.Policy
		if scenario == "modes" {
			name += " " + r.Compat
		}
		if _, ok := series[name]; !ok {
			names = append(names, name)
		}
		x, y := float64(r.Claims), math.Max(r.WallMs, 0.01)
		series[name] = append(series[name], pt{x, y})
		minX, maxX = math.Min(minX, x), math.Max(maxX, x)
		minY, maxY = math.Min(minY, y), math.Max(maxY, y)
	}
	if maxX == minX {
		maxX = minX + 1
	}
	ly0, ly1 := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
	if ly1 == ly0 {
		ly1 = ly0 + 1
	}
	px := func(x float64) float64 { return left + (x-minX)/(maxX-minX)*float64(width-left-right) }
	py := func(y float64) float64 {
		return float64(height-bottom) - (math.Log10(y)-ly0)/(ly1-ly0)*float64(height-bottom-top)
	}
	fmt.Fprintf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart time\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	fmt.Fprintf(b, "<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\">Time vs size: %s</text>\n", html.EscapeString(scenario))
	for e := ly0; e <= ly1; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%s</text>\n",
			left, width-right, y, y, left-4, y+3, fmtMs(math.Pow(10, e)))
	}
	xs := map[float64]bool{}
	for _, r := range rows {
		xs[float64(r.Claims)] = true
	}
	for x := range xs {
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%.0f</text>\n", px(x), height-bottom+14, x)
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\" fill=\"#555\">pending claims</text>\n", (left+width-right)/2, height-8)
	for i, name := range names {
		pts := series[name]
		sort.Slice(pts, func(a, c int) bool { return pts[a].x < pts[c].x })
		pol := strings.Fields(name)[0]
		dash := ""
		if strings.HasSuffix(name, "wildcard") {
			dash = " stroke-dasharray=\"5,3\""
		}
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		fmt.Fprintf(b, "<g data-policy=\"%s\"><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"%s\"/>", html.EscapeString(pol), colorOf(pol), dash, strings.Join(path, " "))
		for _, p := range pts {
			fmt.Fprintf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>", px(p.x), py(p.y), colorOf(pol))
		}
		ly := top + 14*i
		fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text></g>\n",
			width-right+8, width-right+26, ly, ly, colorOf(pol), dash, width-right+30, ly+4, html.EscapeString(name))
	}
	b.WriteString("</svg><figcaption>median wall time (log scale) against batch size</figcaption></figure>\n")
}

// freeChart: whole GPUs free over the replay, one line per policy.
func freeChart(b *strings.Builder, instance string, rows []*Row) {
	const width, height, left, bottom, top, right = 640, 260, 50, 40, 30, 20
	maxX, maxY := 0.0, 1.0
	minX := math.Inf(1)
	for _, r := range rows {
		if r.Replay == nil {
			continue
		}
		maxY = math.Max(maxY, float64(r.Replay.GPUs))
		for _, p := range r.Replay.FreeGPUs {
			maxX = math.Max(maxX, p.Hours)
			minX = math.Min(minX, p.Hours)
		}
	}
	if math.IsInf(minX, 1) || maxX <= minX {
		minX, maxX = 0, 1
	}
	px := func(x float64) float64 { return left + (x-minX)/(maxX-minX)*float64(width-left-right) }
	py := func(y float64) float64 { return float64(height-bottom) - y/maxY*float64(height-bottom-top) }
	fmt.Fprintf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart free\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	fmt.Fprintf(b, "<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\">Whole GPUs free over time: %s</text>\n", html.EscapeString(instance))
	for _, f := range []float64{0, 0.5, 1} {
		y := py(f * maxY)
		fmt.Fprintf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%.0f</text>\n", left, width-right, y, y, left-4, y+3, f*maxY)
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		x := minX + f*(maxX-minX)
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" text-anchor=\"middle\">%.0fh</text>\n", px(x), height-bottom+14, x)
	}
	for _, r := range rows {
		if r.Replay == nil {
			continue
		}
		var path []string
		for _, p := range r.Replay.FreeGPUs {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p.Hours), py(p.Value)))
		}
		fmt.Fprintf(b, "<g data-policy=\"%s\"><polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/></g>\n", html.EscapeString(r.Policy), colorOf(r.Policy), strings.Join(path, " "))
	}
	b.WriteString("</svg><figcaption>whole GPUs free (minimum per time bucket) over replay time in hours</figcaption></figure>\n")
}

// pictureChart draws one policy's placement: a row per GPU, a cell per
// memory slice.
func pictureChart(b *strings.Builder, r *Row) {
	const cell, rowH, top = 26, 22, 44
	// Name the model on each row when the GPUs are of several models.
	mixed := len(pictureModels(r.Picture)) > 1
	left := 92
	if mixed {
		left += 34
	}
	width := left + 8*cell + 10
	height := top + len(r.Picture)*(rowH+4) + 10
	fmt.Fprintf(b, "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart placement\" data-policy=\"%s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n",
		html.EscapeString(r.Policy), width, height, width, height)
	b.WriteString("<defs><pattern id=\"hatch-" + html.EscapeString(r.Policy) + "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ccc\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#999\" stroke-width=\"3\"/></pattern></defs>\n")
	fmt.Fprintf(b, "<text x=\"0\" y=\"16\" font-size=\"13\" font-weight=\"bold\" fill=\"%s\">%s: %d/%d</text>\n", colorOf(r.Policy), html.EscapeString(r.Policy), r.Admitted, r.Claims)
	for s := 0; s < 8; s++ {
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\" fill=\"#777\">%d</text>", left+s*cell+cell/2, top-6, s)
	}
	b.WriteString("\n")
	for i, g := range r.Picture {
		y := top + i*(rowH+4)
		gpu := g.GPU
		if mixed && g.Model != "" {
			gpu += " " + shortModel(g.Model)
		}
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%s</text>", left-4, y+rowH/2+4, html.EscapeString(gpu))
		for s := 0; s < 8; {
			u := g.Slices[s]
			e := s + 1
			for e < 8 && u.Claim != "" && g.Slices[e].Claim == u.Claim && g.Slices[e].Device == u.Device {
				e++
			}
			x := left + s*cell
			wd := (e - s) * cell
			switch {
			case u.Claim == "":
				fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"#bbb\"/>", x, y, wd, rowH)
			case u.Existing:
				fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#hatch-%s)\" stroke=\"#666\"><title>%s (running): %s</title></rect>", x, y, wd, rowH, html.EscapeString(r.Policy), html.EscapeString(u.Claim), html.EscapeString(u.Device))
			default:
				label := profileLabel(u)
				fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#333\"><title>%s: %s</title></rect>", x, y, wd, rowH, claimColor(label, e-s), html.EscapeString(u.Claim), html.EscapeString(u.Device))
				if wd >= 2*cell || len(label) <= 3 {
					fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" font-size=\"9\" text-anchor=\"middle\">%s</text>", x+wd/2, y+rowH/2+3, html.EscapeString(label))
				}
			}
			s = e
		}
		b.WriteString("\n")
	}
	b.WriteString("</svg></figure>\n")
}

// profileLabel labels a placement with its device's profile attribute
// ("2g.10gb" for gpu-3-mig-2g10gb-4); a device without one (the whole GPU)
// is "full".
func profileLabel(u SliceUse) string {
	if u.Profile == "" {
		return "full"
	}
	return u.Profile
}

// pictureModels lists the GPU models named in a picture, in order of
// appearance; none for the default A100 fleet.
func pictureModels(pic []GPUPicture) []string {
	var out []string
	for _, g := range pic {
		if g.Model != "" && !contains(out, g.Model) {
			out = append(out, g.Model)
		}
	}
	return out
}

// shortModel: "NVIDIA H100 80GB HBM3" -> "H100", "NVIDIA
// A100-SXM4-40GB" -> "A100".
func shortModel(product string) string {
	m := strings.TrimPrefix(product, "NVIDIA ")
	m, _, _ = strings.Cut(m, "-")
	m, _, _ = strings.Cut(m, " ")
	return m
}

// profileLegend lists the profiles of the pictured models (A100 when none
// is named), grouped by model when there are several. Colours follow the
// placement's shape, not its name: an A100 1g.10gb and an H100 1g.20gb
// (one compute slice, two memory slices) share a colour, an A100 and an
// H100 1g.10gb do not.
func profileLegend(products []string) string {
	var models []*gen.GPUModel
	for _, p := range products {
		for _, gm := range []*gen.GPUModel{&gen.A100, &gen.H100} {
			if gm.Name == p {
				models = append(models, gm)
			}
		}
	}
	if len(models) == 0 {
		models = []*gen.GPUModel{&gen.A100}
	}
	var b strings.Builder
	for _, gm := range models {
		if len(models) > 1 {
			fmt.Fprintf(&b, "<b>%s</b>: ", html.EscapeString(shortModel(gm.Name)))
		}
		for _, pr := range gm.Profiles {
			l := pr.Name
			fmt.Fprintf(&b, `<svg width="12" height="12" role="img" aria-label="%s"><rect width="12" height="12" fill="%s" stroke="#333"/></svg> %s &#160; `, l, claimColor(l, pr.Slices), l)
		}
	}
	return b.String()
}

// claimColor colours a placement by its profile's shape: compute slices
// ("1g", "2g", ...), media extensions, and for 1g profiles the memory
// slices it spans.
func claimColor(label string, slices int) string {
	palette := []string{"#8dd3c7", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#ffffb3"}
	switch {
	case strings.HasPrefix(label, "1g"):
		if strings.Contains(label, "+me") {
			return palette[7]
		}
		if slices >= 2 {
			return palette[1]
		}
		return palette[0]
	case strings.HasPrefix(label, "2g"):
		return palette[3]
	case strings.HasPrefix(label, "3g"):
		return palette[4]
	case strings.HasPrefix(label, "4g"):
		return palette[2]
	case strings.HasPrefix(label, "7g"), label == "full":
		return palette[5]
	}
	h := fnv.New32a()
	h.Write([]byte(label))
	return palette[h.Sum32()%uint32(len(palette))]
}
