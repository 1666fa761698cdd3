package mip_test

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
	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// TestRichAgainstCBC: on small clusters of the independent generator's
// rich family (firstAvailable, several devices on one GPU, count 2 on one
// GPU or with distinctAttribute, CEL on capacity and productName, A100-40,
// A100-80 and H100 nodes), CBC's optimum of the exported per-device MIP is
// the true optimum, and
//   - the aggregated models, per node and global (with firstAvailable as
//     a choice among an item's ways), solved by CBC, are never below it,
//     and the global one never below the per-node one;
//   - the engine's answer passes the independent checker, is never above
//     it, its bound never below it, and it is called optimal only at it;
//   - CBC's own solution decodes to allocations the checker accepts.
func TestRichAgainstCBC(t *testing.T) {
	if mip.CBCPath() == "" {
		t.Skip("cbc not installed (Debian: apt-get install coinor-cbc); the rich family is not compared")
	}
	dir := t.TempDir()
	solve := func(t *testing.T, name string, write func(f *os.File) error) int64 {
		t.Helper()
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		err = write(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		sol, err := mip.SolveCBC(context.Background(), path, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(sol.Status, "Optimal") {
			t.Fatalf("cbc on %s: %s", name, sol.Status)
		}
		return int64(math.Round(sol.Objective))
	}
	unit := func(*model.Claim) int64 { return 1 }
	for i, cfg := range []scalegen.Config{
		{Nodes: 1, GPUs: 2, Claims: 10, Seed: 1}, {Nodes: 2, GPUs: 2, Claims: 16, Seed: 2},
		{Nodes: 4, GPUs: 1, Claims: 16, Seed: 3}, {Nodes: 3, GPUs: 2, Claims: 22, Seed: 4},
		{Nodes: 4, GPUs: 2, Claims: 30, Seed: 5}, {Nodes: 2, GPUs: 3, Claims: 24, Seed: 6},
	} {
		cfg.Family = "rich"
		t.Run(fmt.Sprintf("%dx%d:%d seed %d", cfg.Nodes, cfg.GPUs, cfg.Claims, cfg.Seed), func(t *testing.T) {
			objs := scalegen.Generate(cfg)
			p, err := model.Build(context.Background(), objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var prog *mip.Program
			opt := solve(t, fmt.Sprintf("m%d.lp", i), func(f *os.File) (err error) {
				prog, err = mip.WriteLP(f, p)
				return err
			})
			sol, err := mip.SolveCBC(context.Background(), filepath.Join(dir, fmt.Sprintf("m%d.lp", i)), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			res := &alloc.Result{}
			for _, ch := range prog.Decode(sol.Values) {
				a := &alloc.Assignment{Claim: ch.Claim, Node: ch.Node}
				for _, pk := range ch.Picks {
					a.Picks = append(a.Picks, alloc.Pick{Req: pk.Req, Alt: pk.Alt, Dev: pk.Dev})
				}
				if a.Node < 0 && len(a.Picks) > 0 {
					a.Node = p.Devices[a.Picks[0].Dev].Reach[0]
				}
				res.Assignments = append(res.Assignments, a)
			}
			if claims, err := alloc.Allocated(p, res); err != nil {
				t.Fatal(err)
			} else if err := check.Check(objs, claims, check.Options{}); err != nil {
				t.Fatalf("CBC's optimum does not check: %v", err)
			}

			var live []*model.Claim
			for _, c := range p.Claims {
				if c.Err == nil {
					live = append(live, c)
				}
			}
			rel, err := bound.New(context.Background(), p, live, unit)
			if err != nil {
				t.Fatal(err)
			}
			node := solve(t, fmt.Sprintf("n%d.lp", i), func(f *os.File) error { _, err := rel.WriteNodeAggregateLP(f); return err })
			global := solve(t, fmt.Sprintf("g%d.lp", i), func(f *os.File) error { _, err := rel.WriteAggregateLP(f); return err })
			if node < opt || global < node {
				t.Errorf("aggregated optima: per node %d, global %d; want optimum %d <= per node <= global", node, global, opt)
			}

			run, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			claims, err := alloc.Allocated(p, run)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(objs, claims, check.Options{}); err != nil {
				t.Fatal(err)
			}
			got := int64(run.Stats.Admitted)
			if got > opt || run.Stats.Bound < opt || run.Stats.Optimal && got != opt {
				t.Errorf("drasat %d (bound %d, optimal %v), CBC's optimum %d", got, run.Stats.Bound, run.Stats.Optimal, opt)
			}
			t.Logf("optimum %d; aggregated per node %d, global %d; drasat %d, bound %d", opt, node, global, got, run.Stats.Bound)
		})
	}
}
