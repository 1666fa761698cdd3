package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/bench/gen"
	"golang.org/x/net/html"
)

func TestHTMLReport(t *testing.T) {
	rep := runSmall(t, "mig", "1x4:20", OpenBConfig{})
	rep2 := runSmall(t, "mig", "2x4:30", OpenBConfig{})
	rep.Rows = append(rep.Rows, rep2.Rows...)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// Count charts by class and policy.
	charts := map[string]map[string]int{} // class -> policy -> count
	var walk func(n *html.Node, inChart string)
	walk = func(n *html.Node, inChart string) {
		if n.Type == html.ElementNode {
			attr := map[string]string{}
			for _, a := range n.Attr {
				attr[a.Key] = a.Val
			}
			if n.Data == "svg" && strings.HasPrefix(attr["class"], "chart ") {
				inChart = strings.TrimPrefix(attr["class"], "chart ")
				if charts[inChart] == nil {
					charts[inChart] = map[string]int{}
				}
				if p := attr["data-policy"]; p != "" {
					charts[inChart][p]++
				}
			} else if inChart != "" && n.Data == "g" && attr["data-policy"] != "" {
				charts[inChart][attr["data-policy"]]++
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inChart)
		}
	}
	walk(doc, "")
	for _, p := range Policies {
		if got := charts["placement"][p]; got != 2 {
			t.Errorf("placement pictures of %s: %d, want one per instance (2)", p, got)
		}
		if got := charts["admitted"][p]; got != 2 {
			t.Errorf("admitted bars of %s: %d, want 2", p, got)
		}
		if got := charts["time"][p]; got != 1 {
			t.Errorf("time series of %s: %d, want 1", p, got)
		}
	}
	// The SVG parts must be well-formed XML on their own too.
	s := buf.String()
	if n := strings.Count(s, "<svg"); n != strings.Count(s, "</svg>") {
		t.Errorf("%d <svg> but %d </svg>", n, strings.Count(s, "</svg>"))
	}
	if !strings.Contains(s, "</html>") || strings.Contains(s, "<script") || strings.Contains(s, "http://") && strings.Contains(s, "src=") {
		t.Error("report is not self-contained")
	}
}

// TestHTMLMixedFleet: on a mixed fleet the placement pictures name each
// GPU's model, the legend lists both models' profiles, and colours follow
// a placement's shape rather than its (ambiguous) name.
func TestHTMLMixedFleet(t *testing.T) {
	rep, err := Run(context.Background(), Config{Scenarios: []string{"mig"}, Sizes: map[string][]Size{"mig": {{Nodes: 2, GPUs: 4, Claims: 30}}},
		Seed: 1, Timeout: 3 * time.Second, MIGGPU: "mixed", Policies: []string{PolicyFirstFit, PolicyDrasat}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	s := buf.String()
	for _, want := range []string{"Placements on mig 2x4:30 mixed", "<b>A100</b>: ", "<b>H100</b>: ", "node-000/gpu-0 A100<", "node-001/gpu-3 H100<",
		`aria-label="1g.20gb"`, `aria-label="1g.5gb+me"`, `aria-label="7g.80gb"`} {
		if !strings.Contains(s, want) {
			t.Errorf("mixed report lacks %q", want)
		}
	}
	if _, err := html.Parse(strings.NewReader(s)); err != nil {
		t.Fatal(err)
	}
	// 1g.10gb is two memory slices on an A100 and one on an H100.
	if claimColor("1g.10gb", 2) == claimColor("1g.10gb", 1) {
		t.Error("A100 and H100 1g.10gb drawn alike")
	}
	for _, pair := range [][2]gen.MIGProfile{{gen.A100.Profiles[0], gen.H100.Profiles[0]}, {gen.A100.Profiles[2], gen.H100.Profiles[2]}, {gen.A100.Profiles[1], gen.H100.Profiles[1]}, {gen.A100.Profiles[6], gen.H100.Profiles[6]}} {
		if a, h := claimColor(pair[0].Name, pair[0].Slices), claimColor(pair[1].Name, pair[1].Slices); a != h {
			t.Errorf("A100 %s (%s) and H100 %s (%s): same shape, different colours", pair[0].Name, a, pair[1].Name, h)
		}
	}
	// The default fleet's legend: the A100 profiles, no model headings.
	def := profileLegend(nil)
	if strings.Contains(def, "<b>") || !strings.Contains(def, `aria-label="4g.20gb"`) || strings.Contains(def, "80gb") {
		t.Errorf("default legend: %s", def)
	}
}
