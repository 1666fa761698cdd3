//go:build e2eload

package e2e

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/model"
)

// TestLoadAdmittedOrder needs no cluster: it says, for LOAD_SIZE, how
// early in the arrival order the pods the offline optimum admits can be.
// On a burst the resourceclaim controller creates the claims in about the
// pods' order at its own rate, so a pod's bind latency is at least the
// time its claim takes to appear: the median admitted pod's position
// bounds the live median latency from below, whatever drasat does.
// Among claims of the same spec any allocation serves any of them, so
// the best drasat can do is give each spec's admitted count to its
// earliest pods (k8s/plan.go preferReal, stand-ins by their pod's age).
func TestLoadAdmittedOrder(t *testing.T) {
	sizes, err := bench.ParseSizes(envOr("LOAD_SIZE", "8x8:300"))
	must(t, err)
	insts, err := bench.Generate("mig", sizes[0], 1, bench.GenerateOptions{})
	must(t, err)
	objs := insts[0].Objs
	p, err := model.Build(context.Background(), objs, model.Options{Compat: insts[0].Compat})
	must(t, err)
	out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 10 * time.Second})
	must(t, err)

	var pending []*resourceapi.ResourceClaim // the pods' order
	for _, c := range objs.Claims {
		if c.Status.Allocation == nil {
			pending = append(pending, c)
		}
	}
	admitted := map[string]bool{}
	for _, a := range out.Assignments {
		if a.Claim.Obj.Status.Allocation == nil {
			admitted[a.Claim.Obj.Name] = true
		}
	}
	// Groups of the same demand, and each group's admitted count.
	group := make([]int, len(pending))
	var reps []*resourceapi.ResourceClaim
	var count []int
	for i, c := range pending {
		g := slices.IndexFunc(reps, func(r *resourceapi.ResourceClaim) bool {
			return r.Annotations[model.WeightAnnotation] == c.Annotations[model.WeightAnnotation] && reflect.DeepEqual(r.Spec, c.Spec)
		})
		if g < 0 {
			reps, count = append(reps, c), append(count, 0)
			g = len(reps) - 1
		}
		group[i] = g
		if admitted[c.Name] {
			count[g]++
		}
	}
	var asSolved, earliest []int
	left := slices.Clone(count)
	for i, c := range pending {
		if admitted[c.Name] {
			asSolved = append(asSolved, i)
		}
		if g := group[i]; left[g] > 0 {
			left[g]--
			earliest = append(earliest, i)
		}
	}
	if len(asSolved) != len(earliest) || len(asSolved) != out.Stats.Admitted {
		t.Fatalf("admitted %d, as solved %d, earliest per spec %d", out.Stats.Admitted, len(asSolved), len(earliest))
	}
	partly := 0 // specs where who gets the allocations matters
	for g := range reps {
		n := 0
		for _, x := range group {
			if x == g {
				n++
			}
		}
		if count[g] > 0 && count[g] < n {
			partly++
		}
	}
	t.Logf("%d specs among %d pending claims, %d of them partly admitted", len(reps), len(pending), partly)
	med := func(xs []int) int { return xs[len(xs)/2] }
	t.Logf("%d of %d pending admitted (optimal %v); median admitted pod's position in the arrival order: %d as solved, %d at best (each spec's earliest pods); the scheduler alone's first-fit admits its pods in order, median position about half its count",
		out.Stats.Admitted, len(pending), out.Stats.Optimal, med(asSolved), med(earliest))
}
