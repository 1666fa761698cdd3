package bound_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
)

// TestAggregateLP: the aggregated claim-pattern program, solved by CBC, is
// a relaxation: never below drasat's proven optimum, never above the
// device-kind bound; on the coupled instances of TestPatternBoundTighter
// it is the optimum. The per-node program lies between the optimum and
// the global program.
func TestAggregateLP(t *testing.T) {
	if mip.CBCPath() == "" {
		t.Skip("cbc not installed (Debian: apt-get install coinor-cbc)")
	}
	type inst struct {
		name string
		objs *input.Objects
		opt  int64 // -1: drasat's proven optimum
	}
	var insts []inst
	for _, fam := range gen.MIGFamilies {
		in, err := bench.Generate("mig", bench.Size{Nodes: 2, GPUs: 2, Claims: 16}, 1, bench.GenerateOptions{MIGFamily: fam, MIGGPU: "mixed"})
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst{in[0].Name(), in[0].Objs, -1})
	}
	for seed, opt := range map[uint64]int64{9: 4, 19: 2} {
		cfg := gen.MIGConfig{Nodes: 1, GPUsPerNode: 3, Claims: 14, Seed: seed, Fragmented: 1, MultiDevice: 0.7, MatchShare: 0.99, PreallocMax: 3}
		insts = append(insts, inst{fmt.Sprintf("coupled seed %d", seed), gen.MIG(cfg), opt})
	}
	dir := t.TempDir()
	unit := func(*model.Claim) int64 { return 1 }
	for i, in := range insts {
		t.Run(in.name, func(t *testing.T) {
			p, err := model.Build(context.Background(), in.objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Stats.Optimal {
				t.Skipf("optimum not proven")
			}
			opt := int64(res.Stats.Admitted)
			rel := relaxationOf(t, p, p.Claims, unit)
			kind := rel.Solve(context.Background(), 0, time.Now().Add(time.Minute), bound.Options{})
			path := filepath.Join(dir, fmt.Sprintf("a%d.lp", i))
			var sb strings.Builder
			if _, err := rel.WriteAggregateLP(&sb); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			sol, err := mip.SolveCBC(context.Background(), path, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sol.Status, "Optimal") {
				t.Fatalf("cbc: %s", sol.Status)
			}
			agg := int64(math.Round(sol.Objective))
			// A relaxation: never below the optimum, and at most the
			// device-kind bound, on the rich family too (firstAvailable
			// is a choice among the item's ways; with its alternatives
			// merged into the fewest devices it was 9 against 8 on mixed
			// 2x2:16).
			if agg < opt || agg > kind.Bound {
				t.Errorf("aggregated optimum %d, want between the optimum %d and the device-kind bound %d", agg, opt, kind.Bound)
			}
			if in.opt >= 0 && agg != in.opt {
				t.Errorf("aggregated optimum %d, want the optimum %d", agg, in.opt)
			}
			// Per node: still a relaxation, and at most the global model.
			sb.Reset()
			if _, err := rel.WriteNodeAggregateLP(&sb); err != nil {
				t.Fatal(err)
			}
			npath := filepath.Join(dir, fmt.Sprintf("n%d.lp", i))
			if err := os.WriteFile(npath, []byte(sb.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			nsol, err := mip.SolveCBC(context.Background(), npath, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(nsol.Status, "Optimal") {
				t.Fatalf("cbc per node: %s", nsol.Status)
			}
			if node := int64(math.Round(nsol.Objective)); node < opt || node > agg {
				t.Errorf("per-node aggregated optimum %d, want between the optimum %d and the global one %d", node, opt, agg)
			}
		})
	}
}
