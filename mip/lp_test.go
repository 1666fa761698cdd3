package mip_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/bench/gen"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
)

// sweep are small instances of every generator family: mig in every claim
// mix and fleet, modes under both semantics, tpu.
func sweep(t *testing.T) []*bench.Instance {
	t.Helper()
	var out []*bench.Instance
	add := func(scenario string, sz bench.Size, seed uint64, opts bench.GenerateOptions) {
		ins, err := bench.Generate(scenario, sz, seed, opts)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ins...)
	}
	for _, fam := range gen.MIGFamilies {
		for seed := uint64(1); seed <= 2; seed++ {
			add("mig", bench.Size{Nodes: 2, GPUs: 2, Claims: 14}, seed, bench.GenerateOptions{MIGFamily: fam})
		}
	}
	// Claim mixes no family has: every setting drawn at random (the
	// shares scaled to leave room for plain single-device claims).
	rng := rand.New(rand.NewPCG(13, 1))
	for seed := uint64(11); seed <= 16; seed++ {
		mix := map[string]float64{"multi": rng.Float64() * 0.4, "whole": rng.Float64() * 0.25, "two-gpu": rng.Float64() * 0.15, "count": rng.Float64() * 0.3}
		if sum := mix["multi"] + mix["whole"] + mix["two-gpu"] + mix["count"]; sum > 0.9 {
			for k := range mix {
				mix[k] *= 0.9 / sum
			}
		}
		mix["match"], mix["prealloc"] = rng.Float64(), rng.Float64()*0.7
		mix["prealloc-max"], mix["prealloc-small"] = float64(1+rng.IntN(4)), float64(rng.IntN(2))
		add("mig", bench.Size{Nodes: 2, GPUs: 3, Claims: 18}, seed, bench.GenerateOptions{MIGMix: mix, MIGGPU: []string{"a100", "h100", "mixed"}[seed%3]})
	}
	add("mig", bench.Size{Nodes: 2, GPUs: 2, Claims: 14}, 3, bench.GenerateOptions{MIGFamily: "independent", MIGGPU: "h100"})
	add("mig", bench.Size{Nodes: 2, GPUs: 2, Claims: 14}, 3, bench.GenerateOptions{MIGFamily: "independent", MIGGPU: "mixed"})
	// Pods whose CPU binds: a pod per claim (1, 2 or 4 CPUs), nodes of
	// 5 to 7 CPUs.
	for seed := uint64(1); seed <= 3; seed++ {
		add("mig", bench.Size{Nodes: 2, GPUs: 2, Claims: 14}, seed, bench.GenerateOptions{MIGMix: map[string]float64{"pod-cpus": float64(4 + seed)}})
	}
	add("modes", bench.Size{Nodes: 1, GPUs: 2, Claims: 12}, 1, bench.GenerateOptions{})
	add("tpu", bench.Size{Nodes: 16, Claims: 6}, 1, bench.GenerateOptions{})
	return out
}

// TestLPAgainstDrasat: on small instances of every family, CBC's optimum of
// the exported program equals drasat's proven optimum, and CBC's solution,
// read back, is a valid allocation for the independent checker. The first
// shows the program admits at least what the engine admits (it is not
// tighter than the semantics), the second that it admits nothing the
// semantics forbid.
func TestLPAgainstDrasat(t *testing.T) {
	if mip.CBCPath() == "" {
		t.Skip("cbc not installed (Debian: apt-get install coinor-cbc); the LP export is not checked")
	}
	dir := t.TempDir()
	for i, in := range sweep(t) {
		t.Run(fmt.Sprintf("%d %s", i, in.Name()), func(t *testing.T) {
			p, err := model.Build(context.Background(), in.Objs, model.Options{Compat: in.Compat})
			if err != nil {
				t.Fatal(err)
			}
			res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Stats.Optimal {
				t.Fatalf("drasat did not prove its optimum (%d, bound %d)", res.Stats.Admitted, res.Stats.Bound)
			}
			path := filepath.Join(dir, fmt.Sprintf("m%d.lp", i))
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := mip.WriteLP(f, p)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			sol, err := mip.SolveCBC(context.Background(), path, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sol.Status, "Optimal") {
				t.Fatalf("cbc: %s", sol.Status)
			}
			var weight int64
			for _, a := range res.Assignments {
				weight += a.Claim.Weight
			}
			if int64(math.Round(sol.Objective)) != weight {
				t.Errorf("cbc optimum %v, drasat's proven optimum %d", sol.Objective, weight)
			}
			checkSolution(t, in, p, prog, sol)
		})
	}
}

// checkSolution decodes a solver's solution into allocations and runs the
// independent checker on them.
func checkSolution(t *testing.T, in *bench.Instance, p *model.Problem, prog *mip.Program, sol *mip.Solution) {
	t.Helper()
	res := &alloc.Result{}
	var weight int64
	for _, ch := range prog.Decode(sol.Values) {
		a := &alloc.Assignment{Claim: ch.Claim, Node: ch.Node}
		for _, pk := range ch.Picks {
			a.Picks = append(a.Picks, alloc.Pick{Req: pk.Req, Alt: pk.Alt, Dev: pk.Dev})
		}
		if a.Node < 0 && len(a.Picks) > 0 {
			if dev := p.Devices[a.Picks[0].Dev]; !dev.All && len(dev.Reach) > 0 {
				a.Node = dev.Reach[0]
			}
		}
		res.Assignments = append(res.Assignments, a)
		weight += ch.Claim.Weight
	}
	if float64(weight) != math.Round(sol.Objective) {
		t.Errorf("decoded weight %d, solver's objective %v", weight, sol.Objective)
	}
	claims, err := alloc.Allocated(p, res)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(in.Objs, claims, check.Options{Compat: in.Compat}); err != nil {
		t.Errorf("the solver's allocation is invalid: %v", err)
	}
}
