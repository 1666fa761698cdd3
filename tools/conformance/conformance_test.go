package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConformance runs every case of upstream's allocator table against
// drasat and grades it (see Grade). It fails on any disagreement, on any
// case drasat does not support, and on any case where upstream's allocator
// itself does not meet the table (a broken extraction).
func TestConformance(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	src, err := Locate(root)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := Extract(src, filepath.Join(root, ".cache", "conformance"), func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 100 {
		t.Fatalf("only %d cases extracted from %s@%s: the extraction is broken", len(cases), Module, src.Version)
	}
	counts := map[string]int{}
	var failures []string
	var notApplicable []string
	for _, c := range cases {
		if !c.TableHolds {
			failures = append(failures, fmt.Sprintf("%s: upstream's allocator does not meet the table (extraction broken?)", c.Name))
		}
		v, _ := Grade(context.Background(), c)
		counts[v.Grade]++
		switch v.Grade {
		case Disagree, Unsupported:
			failures = append(failures, fmt.Sprintf("%s: %s: %s", c.Name, v.Grade, v.Why))
		case NotApplicable:
			notApplicable = append(notApplicable, fmt.Sprintf("%s (%s)", c.Name, v.Why))
		}
	}
	line := fmt.Sprintf("conformance: %d cases, %d agree, %d disagree, %d unsupported, %d not applicable (%s@%s)",
		len(cases), counts[Agree], counts[Disagree], counts[Unsupported], counts[NotApplicable], Module, src.Version)
	fmt.Fprintln(os.Stdout, line)
	t.Log(line)
	t.Logf("not applicable (need a feature off that drasat always has on):\n  %s", strings.Join(notApplicable, "\n  "))
	if len(failures) > 0 {
		t.Errorf("%d cases fail:\n  %s", len(failures), strings.Join(failures, "\n  "))
	}
}
