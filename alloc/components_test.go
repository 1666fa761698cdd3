package alloc

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// naiveComponents is components as it was first written: every claim
// joined with every candidate device.
func naiveComponents(p *model.Problem) [][]int {
	nd, ns := len(p.Devices), len(p.CounterSets)
	uf := model.NewDisjointSets(len(p.Claims) + nd + ns)
	dev := func(d int) int { return len(p.Claims) + d }
	for _, c := range p.Claims {
		for _, r := range c.Requests {
			for _, a := range r.Alternatives {
				for _, d := range a.Candidates {
					uf.Union(c.Index, dev(d))
				}
			}
		}
	}
	for _, d := range p.Devices {
		for _, cons := range d.Consumes {
			uf.Union(dev(d.Index), len(p.Claims)+nd+cons.Set)
		}
		for _, o := range d.Incompatible {
			uf.Union(dev(d.Index), dev(o))
		}
	}
	podUnions(p, uf.Union)
	index := map[int]int{}
	var out [][]int
	for _, c := range p.Claims {
		r := uf.Find(c.Index)
		i, ok := index[r]
		if !ok {
			i = len(out)
			index[r] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c.Index)
	}
	return out
}

// TestComponentsMatchNaive holds components, which joins a class's shared
// candidate list once, to the claim-by-device joining on every example
// and on generated MIG clusters where most claims share their lists.
func TestComponentsMatchNaive(t *testing.T) {
	inputs := map[string]*input.Objects{}
	dirs, _ := filepath.Glob("../examples/*")
	for _, d := range dirs {
		objs, _, err := input.Load([]string{d}, nil)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		inputs[d] = objs
	}
	for _, cfg := range []scalegen.Config{{Nodes: 4, GPUs: 8, Claims: 120, Seed: 1}, {Nodes: 3, GPUs: 2, Claims: 40, Seed: 2}} {
		inputs[fmt.Sprintf("scalegen %+v", cfg)] = scalegen.Generate(cfg)
	}
	if len(inputs) < 5 {
		t.Fatalf("only %d inputs", len(inputs))
	}
	for name, objs := range inputs {
		p, err := model.Build(context.Background(), objs, model.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got [][]int
		for _, g := range components(p) {
			var ids []int
			for _, c := range g {
				ids = append(ids, c.Index)
			}
			got = append(got, ids)
		}
		if want := naiveComponents(p); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: components %v, claim by device %v", name, got, want)
		}
	}
}

// BenchmarkComponents splits a generated 256-node A100 MIG cluster with
// 8,000 pending claims (one component: the claims of a profile share
// every GPU), the way (new) and claim by device (naive).
//
//	go test -run '^$' -bench Components -benchtime 5x ./alloc/
func BenchmarkComponents(b *testing.B) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 256, GPUs: 8, Claims: 8000, Seed: 1})
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("new", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			components(p)
		}
	})
	b.Run("naive", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			naiveComponents(p)
		}
	})
}
