package explain

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/model"
)

// BenchmarkExplainLostClaims explains the first four claims an allocation
// run leaves out of a 64-node A100 MIG batch (64x8 GPUs, 2,000 claims):
// claims that lost to others on every GPU, whose minimal cores name
// hundreds of counter sets. The allocation run is setup, not measured.
//
//	go test ./explain/ -run '^$' -bench ExplainLostClaims -benchtime 3x
func BenchmarkExplainLostClaims(b *testing.B) {
	ctx := context.Background()
	insts, err := bench.Generate("mig", bench.Size{Nodes: 64, GPUs: 8, Claims: 2000}, 1, bench.GenerateOptions{MIGGPU: "a100", MIGFamily: "default"})
	if err != nil {
		b.Fatal(err)
	}
	p, err := model.Build(ctx, insts[0].Objs, model.Options{})
	if err != nil {
		b.Fatal(err)
	}
	allocs, placed := allocateFor(b, p, 10*time.Second)
	var lost []*model.Claim
	for _, c := range p.Claims {
		if !placed[c.Index] && len(lost) < 4 {
			lost = append(lost, c)
		}
	}
	b.ResetTimer()
	for range b.N {
		for _, c := range lost {
			x, err := Explain(ctx, p, c, allocs, Options{Deadline: time.Now().Add(5 * time.Minute)})
			if err != nil || !x.Minimal {
				b.Fatalf("%s: %v (minimal %v)", c.Key, err, x != nil && x.Minimal)
			}
		}
	}
}
