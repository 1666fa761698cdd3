package bench

import (
	"bytes"
	"strings"
	"testing"

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
