package bound_test

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// A distinctAttribute claim (two 1g devices on two GPUs of one node) that
// the realisation gives bins gets as many bins as it has items, so that
// its group can hold it; on the rich family's dive answers it often does,
// and taken slot by slot its items shared one bin.
func TestRealiseSpreadsDistinctClaims(t *testing.T) {
	spread, whole := 0, 0
	for seed := uint64(1); seed <= 3; seed++ {
		objs := scalegen.Generate(scalegen.Config{Nodes: 4, GPUs: 8, Claims: 200, Seed: seed, Family: "rich"})
		p, err := model.Build(context.Background(), objs, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rel := relaxationOf(t, p, p.Claims, func(*model.Claim) int64 { return 1 })
		na, err := rel.NodeAggregateBy(context.Background(), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		sol, _, err := na.Dive(context.Background(), time.Now().Add(time.Minute), 0)
		if err != nil || sol.Values == nil {
			t.Fatalf("dive: %v", err)
		}
		re, err := na.Realise(sol.Values, p.Claims)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Claims {
			if _, on := re.Nodes[c.Index]; !on || len(c.Constraints) == 0 || c.Constraints[0].Kind != model.DistinctAttribute {
				continue
			}
			bins, ok := re.Bins[c.Index]
			switch {
			case !ok:
				whole++
			case len(bins) < 2:
				t.Errorf("seed %d: %s has its two items on bins %v", seed, c.Key, bins)
			default:
				spread++
			}
		}
	}
	if spread == 0 {
		t.Fatalf("no distinct claim admitted with bins (%d with its whole node)", whole)
	}
	t.Logf("distinct claims on two bins: %d; left their whole node: %d", spread, whole)
}
