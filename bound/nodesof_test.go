package bound

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// naiveNodesOf is NodesOf as first written: each claim scans the nodes
// from the first.
func naiveNodesOf(r *Relaxation, values map[string]float64, claims []*model.Claim) map[int]int {
	classOf := map[string]int{}
	for ki, k := range r.classes {
		classOf[k.key] = ki
	}
	took := map[[2]int]int{}
	out := map[int]int{}
	for _, c := range claims {
		ki, ok := classOf[c.ClassKey()]
		if !ok {
			continue
		}
		for n := range r.p.Nodes {
			key := [2]int{ki, n}
			if float64(took[key]) < values[fmt.Sprintf("y%d_%d", ki, n)]-0.5 {
				took[key]++
				out[c.Index] = n
				break
			}
		}
	}
	return out
}

// TestNodesOfMatchesScan holds NodesOf's cursors to the scan on random
// solutions (fractional, zero, more than the claims) of a generated
// cluster's relaxation.
func TestNodesOfMatchesScan(t *testing.T) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 6, GPUs: 2, Claims: 90, Seed: 3})
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(context.Background(), p, p.Claims, func(*model.Claim) int64 { return 1 })
	if err != nil {
		t.Fatal(err)
	}
	if len(r.classes) < 2 {
		t.Fatalf("%d classes", len(r.classes))
	}
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 200; trial++ {
		values := map[string]float64{}
		for ki := range r.classes {
			for n := range p.Nodes {
				if rng.Intn(3) > 0 {
					values[fmt.Sprintf("y%d_%d", ki, n)] = float64(rng.Intn(6)) + []float64{0, 0.3, 0.5, 0.7}[rng.Intn(4)]
				}
			}
		}
		claims := append([]*model.Claim(nil), p.Claims...)
		rng.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
		claims = claims[:rng.Intn(len(claims)+1)]
		got, want := r.NodesOf(values, claims), naiveNodesOf(r, values, claims)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("trial %d: NodesOf %v, scan %v", trial, got, want)
		}
		if trial == 0 && len(want) == 0 {
			t.Fatal("the first trial placed no claim: the comparison proves nothing")
		}
	}
}
