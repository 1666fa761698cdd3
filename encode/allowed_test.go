package encode_test

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/tools/scalegen"
)

// AllowedDevices looks candidates up from the allowed list instead of
// scanning them; the model must be the one Allowed gives for the same
// devices, clause for clause.
func TestAllowedDevicesIsAllowed(t *testing.T) {
	objs := scalegen.Generate(scalegen.Config{Nodes: 3, GPUs: 2, Claims: 40, Seed: 7})
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 20; trial++ {
		list := []int{}
		set := map[int]bool{}
		for d := range p.Devices {
			// Small sets (a GPU) and large ones (most of the cluster).
			if r.IntN(100) < []int{3, 30, 90}[trial%3] {
				list = append(list, d)
				set[d] = true
			}
		}
		if trial == 0 {
			list, set = []int{}, map[int]bool{} // nothing allowed is not "all"
		}
		claims := p.Claims[r.IntN(10):]
		byFunc, err := encode.Encode(context.Background(), p, claims, encode.Options{Symmetry: true, DeviceSymmetry: true, Allowed: func(d int) bool { return set[d] }})
		if err != nil {
			t.Fatal(err)
		}
		byList, err := encode.Encode(context.Background(), p, claims, encode.Options{Symmetry: true, DeviceSymmetry: true, AllowedDevices: list})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(byFunc.Clauses, byList.Clauses) {
			t.Fatalf("trial %d (%d devices allowed): %d clauses by Allowed, %d by AllowedDevices, or they differ", trial, len(list), len(byFunc.Clauses), len(byList.Clauses))
		}
		xs := 0
		for i, u := range byFunc.Units {
			if !reflect.DeepEqual(u.X, byList.Units[i].X) {
				t.Fatalf("trial %d: unit %d: variables differ", trial, i)
			}
			xs += len(u.X)
		}
		if trial == 0 && xs != 0 {
			t.Fatalf("nothing allowed, yet %d device variables", xs)
		}
		if trial == 2 && xs == 0 {
			t.Fatalf("most devices allowed, yet no device variable: the test tests nothing")
		}
	}
}
