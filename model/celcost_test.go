package model

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// nested returns a CEL condition of depth nested comprehensions over a
// literal list of n ones: its cost grows as n^depth.
func nested(n, depth int) string {
	l := "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]"
	vars := []string{"x", "y", "z", "w"}
	body := strings.Join(vars[:depth], "+") + " > 0"
	for i := depth - 1; i >= 0; i-- {
		body = fmt.Sprintf("%s.all(%s, %s)", l, vars[i], body)
	}
	return body
}

// costlyPool is a slice of n devices that differ in attribute idx (so that
// a selector reading it is evaluated on each), a class whose selector is
// expr, and one claim of that class.
func costlyPool(n int, expr string) string {
	var sb strings.Builder
	sb.WriteString(`apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  devices:
`)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  - name: d%d\n    attributes: {idx: {int: %d}}\n", i, i)
	}
	fmt.Fprintf(&sb, `---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: costly}
spec:
  selectors:
  - cel: {expression: %q}
`, "device.attributes['gpu.example.com'].idx >= 0 && "+expr)
	sb.WriteString(claimYAML("c", "costly", ""))
	return sb.String()
}

// A selector whose estimated cost exceeds the API server's limit is refused
// as the API server would, before any evaluation.
func TestSelectorOverTheCostEstimateIsRefused(t *testing.T) {
	p := buildYAML(t, costlyPool(3, nested(60, 3)))
	err := claimErr(t, p, "default/c")
	if err == nil || !strings.Contains(err.Error(), "too complex: estimated cost") {
		t.Fatalf("claim error %v, want the cost estimate refusal", err)
	}
}

// One selector may cost only so much over all devices in a run; past
// that, its claims are unallocatable and the run goes on.
func TestSelectorCostPerRunIsBounded(t *testing.T) {
	defer func(old uint64) { selectorCostPerRun = old }(selectorCostPerRun)
	selectorCostPerRun = 200_000 // about 5 evaluations of the selector below
	p := buildYAML(t, costlyPool(40, nested(80, 2)))
	err := claimErr(t, p, "default/c")
	if err == nil || !strings.Contains(err.Error(), "cost more than 200000 in all") {
		t.Fatalf("claim error %v, want the per-run cost limit", err)
	}
}

// Build stops when its context ends, returning an error and no problem.
func TestBuildStopsWithItsContext(t *testing.T) {
	objs, _, err := Load([]string{"-"}, strings.NewReader(costlyPool(200, nested(40, 3))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	p, err := Build(ctx, objs, Options{})
	if p != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Build = %v, %v; want no problem and the deadline error", p != nil, err)
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	if p, err := Build(cancelled, objs, Options{}); p != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Build = %v, %v; want no problem and the cancellation", p != nil, err)
	}
}
