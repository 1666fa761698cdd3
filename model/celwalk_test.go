package model

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
)

// TestCELWalkSharedByAlternatives: alternatives with the same class and
// selectors share one walk over the devices (celWalk). The problem must be
// the one that a walk per alternative gives, CEL cost included: with
// selectors that fail on some devices (evaluated and charged again by each
// walk), with and without a memo, with claims asking for every match (the
// look-ahead's shapes), and with CEL budgets that run out part of the way.
func TestCELWalkSharedByAlternatives(t *testing.T) {
	var docs strings.Builder
	docs.WriteString(genNodes)
	for n, node := range []string{"node-a", "node-b", "node-c"} {
		fmt.Fprintf(&docs, "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: %s}\nspec:\n  driver: gpu.example.com\n  nodeName: %s\n  pool: {name: %s, generation: 1, resourceSliceCount: 1}\n  devices:\n", node, node, node)
		for d := 0; d < 6; d++ {
			if (n+d)%3 == 0 {
				// No mem attribute: the selector below fails here.
				fmt.Fprintf(&docs, "  - {name: d%d, attributes: {kind: {string: a}}}\n", d)
			} else {
				fmt.Fprintf(&docs, "  - {name: d%d, attributes: {kind: {string: a}, mem: {int: %d}}}\n", d, d+n)
			}
		}
	}
	// An expensive condition (two nested comprehensions, estimated above
	// CheapSelectorCost): the small budgets run out during its walks.
	list := "[" + strings.TrimSuffix(strings.Repeat("1,", 20), ",") + "]"
	costly := list + ".all(x, " + list + ".all(y, x+y > 0))"
	claim := func(name, extra, expr string) string {
		return "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: " + name + ", namespace: default}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly: {deviceClassName: gpu" + extra + ", selectors: [{cel: {expression: '" + expr + "'}}]}\n"
	}
	for i, expr := range []string{`device.attributes["gpu.example.com"].mem > 2`, `device.attributes["gpu.example.com"].mem > 3 && ` + costly} {
		docs.WriteString(claim(fmt.Sprintf("plain-%d", i), "", expr))
		docs.WriteString(claim(fmt.Sprintf("tolerant-%d", i), ", tolerations: [{operator: Exists}]", expr))
		docs.WriteString(claim(fmt.Sprintf("two-%d", i), ", count: 2", expr))
		docs.WriteString(claim(fmt.Sprintf("shape-%d", i), "", expr))
		docs.WriteString(claim(fmt.Sprintf("all-%d", i), ", allocationMode: All", expr))
	}
	objs, _, err := input.Load([]string{"-"}, strings.NewReader(docs.String()))
	if err != nil {
		t.Fatal(err)
	}
	every := func(c *resourceapi.ResourceClaim) bool { return strings.HasPrefix(c.Name, "shape") }
	defer func() { walkEveryAlternative = false }()
	for _, budget := range []uint64{0, 40, 120, 400} {
		for _, memo := range []bool{false, true} {
			build := func(everyWalk bool) *Problem {
				walkEveryAlternative = everyWalk
				opts := Options{CELCost: budget, EveryMatch: every}
				if memo {
					opts.Memo = NewMemo()
					if _, err := Build(context.Background(), objs, opts); err != nil { // warm it
						t.Fatal(err)
					}
				}
				p, err := Build(context.Background(), objs, opts)
				if err != nil {
					t.Fatal(err)
				}
				p.Options.Memo, p.Options.EveryMatch = nil, nil
				return p
			}
			shared, walked := build(false), build(true)
			if !reflect.DeepEqual(shared, walked) {
				t.Errorf("budget %d, memo %t: the problem with shared walks differs from one walk per alternative (CEL cost %d against %d)", budget, memo, shared.CELCost, walked.CELCost)
			}
			outOfBudget := 0
			for _, c := range shared.Claims {
				if be := (*BudgetError)(nil); errors.As(c.Err, &be) {
					outOfBudget++
				}
			}
			if budget == 0 && (shared.CELCost == 0 || outOfBudget > 0) || budget > 0 && budget < 400 && outOfBudget == 0 {
				t.Errorf("budget %d, memo %t: CEL cost %d, %d claims out of budget: the case tests nothing", budget, memo, shared.CELCost, outOfBudget)
			}
		}
	}
}
