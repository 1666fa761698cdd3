package alloc

import (
	"testing"

	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// The least shares kept by candidate list (leastShares) give every claim
// the size the full walk over its candidates gives, on batches whose claims
// of different specs share candidate lists (the claim mixes users write:
// firstAvailable, capacity in CEL, whole GPUs; shared NICs, whose capacity
// requests are never kept; compatibility groups).
func TestLeastSharesKeptAgreeWithWalk(t *testing.T) {
	rich, err := gen.MIGFamilyConfig("rich", 4, 4, 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]*input.Objects{
		"mig rich":      gen.MIG(rich),
		"scalegen rich": scalegen.Generate(scalegen.Config{Nodes: 4, GPUs: 4, Claims: 200, Seed: 2, Family: "rich"}),
		"nic":           gen.NIC(gen.NICConfig{Nodes: 4, NICsPerNode: 2, Claims: 120, Seed: 1, Running: 0.3}),
		"modes":         gen.Modes(gen.ModesConfig{Nodes: 3, GPUsPerNode: 4, Claims: 80, Seed: 1}),
	}
	for name, objs := range cases {
		t.Run(name, func(t *testing.T) {
			p := build(t, objs, model.CompatKEP5963)
			known := leastShares{}
			looked := 0
			for _, c := range p.Claims {
				for _, r := range c.Requests {
					looked += len(r.Alternatives)
				}
				if got, want := claimSizeShared(p, c, known), claimSizeShared(p, c, nil); got != want {
					t.Fatalf("claim %s: size %v with the kept shares, %v by the walk", c.Obj.Name, got, want)
				}
			}
			if len(known) == 0 && name != "nic" {
				t.Fatalf("no share kept over %d alternatives", looked)
			}
			t.Logf("%d alternatives, %d least shares kept", looked, len(known))
		})
	}
}
