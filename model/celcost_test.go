package model

import (
	"context"
	"errors"
	"fmt"
	"github.com/drasat/drasat/input"
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
	// The selector's own limit: the same in every run, not the run's.
	if be := (*BudgetError)(nil); !errors.As(err, &be) || be.OfTheRun {
		t.Fatalf("claim error %#v, want a BudgetError not of the run", err)
	}
}

// Build stops when its context is cancelled (Ctrl-C), returning an error
// and no problem. Past its deadline (--timeout) no selector is evaluated
// any more: the claims using one that was not evaluated on every device
// are not allocated, with a reason naming the selector and the time
// budget, and the build returns the rest: claims with cheap selectors are
// built first, so a claim after the expensive one in the input is still
// served.
func TestBuildStopsWithItsContext(t *testing.T) {
	cheap := "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: cheap}\nspec:\n  selectors:\n  - cel: {expression: \"device.attributes['gpu.example.com'].idx == 7\"}\n" +
		claimYAML("quick", "cheap", "")
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(costlyPool(200, nested(40, 3))+cheap))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	p, err := Build(ctx, objs, Options{})
	if err != nil {
		t.Fatalf("Build past its deadline: %v; want the problem with the claim's error", err)
	}
	var be *BudgetError
	if err := claimErr(t, p, "default/c"); !errors.As(err, &be) || !strings.Contains(err.Error(), "time budget") || !be.OfTheRun {
		t.Fatalf("claim error %v, want the run's time budget", err)
	}
	if err := claimErr(t, p, "default/quick"); err != nil {
		t.Fatalf("cheap claim: %v; want it built before the expensive one", err)
	}
	cancelled, stop := context.WithCancel(context.Background())
	stop()
	if p, err := Build(cancelled, objs, Options{}); p != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Build = %v, %v; want no problem and the cancellation", p != nil, err)
	}
	// Already past the deadline: nothing is evaluated at all.
	past, stop2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop2()
	p, err = Build(past, objs, Options{})
	if err != nil || p.CELCost != 0 {
		t.Fatalf("Build past the deadline: %v, CEL cost %d; want the problem and no evaluation", err, p.CELCost)
	}
	if err := claimErr(t, p, "default/c"); !errors.As(err, &be) {
		t.Fatalf("claim error %v, want the time budget", err)
	}
}

// One CEL budget per build, shared by every selector: a batch with 20
// different expensive selectors spends at most the budget (and one
// evaluation past it) in all, the claims whose selectors it could not
// evaluate are not allocated with a reason naming the selector and the
// budget, and claims with cheap selectors are still served.
func TestCELBudgetSharedBySelectors(t *testing.T) {
	const devices, expensive, cheap = 40, 20, 5
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
	for i := 0; i < devices; i++ {
		fmt.Fprintf(&sb, "  - name: d%d\n    attributes: {idx: {int: %d}}\n", i, i)
	}
	class := func(name, expr string) {
		fmt.Fprintf(&sb, "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: %s}\nspec:\n  selectors:\n  - cel: {expression: %q}\n", name, expr)
	}
	// Each expensive selector reads idx (so it is evaluated on every
	// device) and differs from the others; one evaluation costs about
	// 40,000, all of them together about 32,000,000.
	for i := 0; i < expensive; i++ {
		class(fmt.Sprintf("costly-%d", i), fmt.Sprintf("device.attributes['gpu.example.com'].idx >= %d && %s", -i-1, nested(80, 2)))
		sb.WriteString(claimYAML(fmt.Sprintf("costly-%d", i), fmt.Sprintf("costly-%d", i), ""))
	}
	for i := 0; i < cheap; i++ {
		class(fmt.Sprintf("cheap-%d", i), fmt.Sprintf("device.attributes['gpu.example.com'].idx == %d", i))
		sb.WriteString(claimYAML(fmt.Sprintf("cheap-%d", i), fmt.Sprintf("cheap-%d", i), ""))
	}
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	const budget = 1_000_000 // about 25 evaluations of one expensive selector
	p, err := Build(context.Background(), objs, Options{CELCost: budget})
	if err != nil {
		t.Fatal(err)
	}
	// At most one evaluation past the budget (the one that crossed it),
	// plus the cheap selectors' (a few units per device).
	if p.CELCost < budget || p.CELCost > budget+100_000 {
		t.Errorf("the build spent CEL cost %d; want the budget %d and at most one evaluation more", p.CELCost, budget)
	}
	refused := 0
	for i := 0; i < expensive; i++ {
		var be *BudgetError
		err := claimErr(t, p, fmt.Sprintf("default/costly-%d", i))
		if err == nil {
			continue
		}
		if !errors.As(err, &be) || !be.OfTheRun || !strings.Contains(err.Error(), "CEL budget (cost 1000000") || !strings.Contains(err.Error(), fmt.Sprintf(">= %d &&", -i-1)) {
			t.Errorf("claim costly-%d: %v; want the run's CEL budget and its selector named", i, err)
		}
		refused++
	}
	if refused < expensive-1 {
		t.Errorf("%d of %d expensive claims refused; the budget covers at most one selector's evaluations", refused, expensive)
	}
	for i := 0; i < cheap; i++ {
		key := fmt.Sprintf("default/cheap-%d", i)
		if err := claimErr(t, p, key); err != nil {
			t.Errorf("cheap claim %s: %v", key, err)
			continue
		}
		for _, c := range p.Claims {
			if c.Key == key && len(c.Requests[0].Alternatives[0].Candidates) != 1 {
				t.Errorf("cheap claim %s: %d candidates, want its one device", key, len(c.Requests[0].Alternatives[0].Candidates))
			}
		}
	}
}

// BenchmarkBuildExpensiveSelectors builds a batch of 20 different
// expensive selectors (each alone within its own limit) with the default
// CEL budget: the wall time of the whole build, which the shared budget
// bounds (about 2 s by the API's estimate; without it, 20 times that).
func BenchmarkBuildExpensiveSelectors(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(costlyPool(200, "true"))
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&sb, "---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: costly-%d}\nspec:\n  selectors:\n  - cel: {expression: %q}\n",
			i, fmt.Sprintf("device.attributes['gpu.example.com'].idx >= %d && %s", -i-1, nested(80, 2)))
		sb.WriteString(claimYAML(fmt.Sprintf("costly-%d", i), fmt.Sprintf("costly-%d", i), ""))
	}
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p, err := Build(context.Background(), objs, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(p.CELCost), "cel-cost")
	}
}
