package frag_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// TestRememberedOutcomesChangeNothing: the measure's remembered outcomes
// (memo.go) are a speed-up only. On instances of several generators (MIG
// GPUs with and without pods, rich claims, a mixed fleet, compatibility
// modes, multi-host TPU slices, NICs, NICs shared by bandwidth), placing every claim greedily and
// then refining gives the same assignments, device for device, and the
// same fragmentation as a measure that works everything out anew.
func TestRememberedOutcomesChangeNothing(t *testing.T) {
	cases := []struct {
		scenario string
		size     bench.Size
		opts     bench.GenerateOptions
	}{
		{"mig", bench.Size{Nodes: 6, GPUs: 8, Claims: 200}, bench.GenerateOptions{}},
		{"mig", bench.Size{Nodes: 6, GPUs: 8, Claims: 200}, bench.GenerateOptions{MIGMix: map[string]float64{"pod-cpus": 48}}},
		{"mig", bench.Size{Nodes: 4, GPUs: 8, Claims: 150}, bench.GenerateOptions{MIGFamily: "rich"}},
		{"mig", bench.Size{Nodes: 4, GPUs: 8, Claims: 150}, bench.GenerateOptions{MIGGPU: "mixed"}},
		{"modes", bench.Size{Nodes: 8, GPUs: 4, Claims: 160}, bench.GenerateOptions{}},
		{"tpu", bench.Size{Nodes: 32, Claims: 20}, bench.GenerateOptions{}},
		{"gpu-nic", bench.Size{Nodes: 8, Claims: 40}, bench.GenerateOptions{}},
		{"nic", bench.Size{Nodes: 16, Claims: 150}, bench.GenerateOptions{}},
	}
	defer frag.RefineUncapped()()
	for _, tc := range cases {
		for seed := uint64(1); seed <= 2; seed++ {
			insts, err := bench.Generate(tc.scenario, tc.size, seed, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, in := range insts {
				name := fmt.Sprintf("%s/%v/%v/seed%d/%d", tc.scenario, tc.size, tc.opts, seed, i)
				t.Run(name, func(t *testing.T) {
					remembered, placed := placeAndRefine(t, in.Objs, in.Compat, false)
					afresh, placedAfresh := placeAndRefine(t, in.Objs, in.Compat, true)
					if placed == 0 {
						t.Fatal("no claim placed: the case tests nothing")
					}
					if placed != placedAfresh || remembered != afresh {
						t.Fatalf("remembered outcomes changed the result:\n%s\nafresh:\n%s", remembered, afresh)
					}
				})
			}
		}
	}
}

// placeAndRefine places every pending claim by FGD, in input order, then
// refines the result without a deadline; it returns the assignments and
// fragmentation as text, and the claims placed greedily.
func placeAndRefine(t *testing.T, objs *input.Objects, compat string, afresh bool) (string, int) {
	t.Helper()
	ctx := context.Background()
	p, err := model.Build(ctx, objs, model.Options{Compat: compat})
	if err != nil {
		t.Fatal(err)
	}
	w := frag.NewWorkload()
	for _, c := range objs.Claims {
		w.Observe(c)
	}
	m, err := frag.For(ctx, objs, p, w)
	if err != nil {
		t.Fatal(err)
	}
	if afresh {
		m.ComputeAfresh()
	}
	res := m.Greedy(p.Claims, frag.FGD)
	placed := len(res.Assignments)
	out := describe(p, res)
	refined := m.Refine(ctx, p, res, time.Now().Add(time.Hour))
	out += "refined:\n" + describe(p, refined)
	f, free := m.Frag(stateOf(p, refined))
	return out + fmt.Sprintf("frag %.12g free %.12g\n", f, free), placed
}

// stateOf is the state with res's assignments taken, pods included.
func stateOf(p *model.Problem, res *alloc.Result) *model.State {
	s := model.NewState(p)
	for _, a := range res.Assignments {
		for _, pk := range a.Picks {
			alloc.TakePick(s, a.Claim, pk)
		}
		s.PlacePod(a.Claim, a.Node)
	}
	return s
}

func describe(p *model.Problem, res *alloc.Result) string {
	out := ""
	for _, a := range res.Assignments {
		out += fmt.Sprintf("%s node %d:", a.Claim.Key, a.Node)
		for _, pk := range a.Picks {
			out += " " + p.Devices[pk.Dev].ID.Device
		}
		out += "\n"
	}
	return out
}
