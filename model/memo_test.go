package model_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// TestMemoMatchesRebuild applies random cluster events (slices
// added, updated, deleted; claims allocated and released; nodes relabelled
// and deleted; new selectors; pods' requests changed and pods bound) to a MIG pool, as a controller's informers
// see them, and builds the problem after each one with one memo kept
// throughout and from scratch: the problems must be identical. It fails if
// the memo answers for a device from an outdated version of it (an update
// it missed) or accounts the CEL cost differently (with a small CEL budget,
// the same selectors must run out of it).
func TestMemoMatchesRebuild(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		budget := uint64(0)
		if seed > 4 {
			budget = 3000 // an expensive evaluation or two: some claims run out of it
		}
		t.Run(fmt.Sprintf("seed=%d/budget=%d", seed, budget), func(t *testing.T) {
			// Pods on even seeds: each pending claim's pod, and the nodes' CPU and memory.
			gopts := bench.GenerateOptions{}
			if seed%2 == 0 {
				gopts.MIGMix = map[string]float64{"pod-cpus": 16}
			}
			insts, err := bench.Generate("mig", bench.Size{Nodes: 4, GPUs: 2, Claims: 40}, seed, gopts)
			if err != nil {
				t.Fatal(err)
			}
			objs := *insts[0].Objs
			rng := rand.New(rand.NewPCG(seed, 7))
			memo := model.NewMemo()
			var gone []*resourceapi.ResourceSlice
			var released []*resourceapi.ResourceClaim
			outOfBudget := false
			for step := range 40 {
				what := event(rng, &objs, &gone, &released, step)
				withMemo, err1 := model.Build(context.Background(), &objs, model.Options{Memo: memo, CELCost: budget})
				fresh, err2 := model.Build(context.Background(), &objs, model.Options{CELCost: budget})
				if fmt.Sprint(err1) != fmt.Sprint(err2) {
					t.Fatalf("step %d (%s): with the memo: %v; rebuilt: %v", step, what, err1, err2)
				}
				if err1 != nil {
					continue
				}
				for _, c := range fresh.Claims {
					if be := (*model.BudgetError)(nil); errors.As(c.Err, &be) {
						outOfBudget = true
					}
				}
				withMemo.Options.Memo = nil
				if !reflect.DeepEqual(withMemo, fresh) {
					t.Fatalf("step %d (%s): the problem built with the memo differs from the one rebuilt: %s", step, what, firstDiff(withMemo, fresh))
				}
			}
			if budget > 0 && !outOfBudget {
				t.Fatal("no claim ran out of the CEL budget")
			}
			if memo.Reused == 0 {
				t.Fatalf("the memo never answered (%d evaluations)", memo.Evaluations)
			}
			t.Logf("%d evaluations, %d answers reused", memo.Evaluations, memo.Reused)
		})
	}
}

// event changes objs at random as an informer event would (a changed
// object is a new object) and says what it did.
func event(rng *rand.Rand, objs *input.Objects, gone *[]*resourceapi.ResourceSlice, released *[]*resourceapi.ResourceClaim, step int) string {
	profiles := []string{"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "1g.5gb+me", "7g.40gb"}
	if len(objs.Pods) > 0 && rng.IntN(8) == 0 { // a pod updated: other requests, maybe bound
		i := rng.IntN(len(objs.Pods))
		pod := objs.Pods[i].DeepCopy()
		objs.Pods = slices.Clone(objs.Pods)
		objs.Pods[i] = pod
		for j := range pod.Spec.Containers {
			pod.Spec.Containers[j].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(1+rng.IntN(8)), resource.DecimalSI)}
		}
		if rng.IntN(2) == 0 && len(objs.Nodes) > 0 {
			pod.Spec.NodeName = objs.Nodes[rng.IntN(len(objs.Nodes))].Name
		}
		return "pod " + pod.Name + " updated"
	}
	switch rng.IntN(8) {
	case 0, 1: // a slice updated: one device's profile, or a counter
		i := rng.IntN(len(objs.Slices))
		s := objs.Slices[i].DeepCopy()
		objs.Slices = slices.Clone(objs.Slices)
		objs.Slices[i] = s
		if len(s.Spec.SharedCounters) > 0 {
			cs := &s.Spec.SharedCounters[rng.IntN(len(s.Spec.SharedCounters))]
			for name, c := range cs.Counters {
				c.Value = *resource.NewQuantity(c.Value.Value()*int64(1+rng.IntN(3))/2, c.Value.Format)
				cs.Counters[name] = c
				return "slice " + s.Name + " updated: counter " + cs.Name + "/" + name
			}
		}
		if len(s.Spec.Devices) == 0 {
			return "nothing"
		}
		d := &s.Spec.Devices[rng.IntN(len(s.Spec.Devices))]
		for name, a := range d.Attributes {
			if strings.HasSuffix(string(name), "profile") && a.StringValue != nil {
				p := profiles[rng.IntN(len(profiles))]
				d.Attributes[name] = resourceapi.DeviceAttribute{StringValue: &p}
			}
		}
		if rng.IntN(3) == 0 && len(d.ConsumesCounters) > 0 {
			for name, c := range d.ConsumesCounters[0].Counters {
				c.Value = *resource.NewQuantity(c.Value.Value()*2, c.Value.Format)
				d.ConsumesCounters[0].Counters[name] = c
				return "slice " + s.Name + " updated: device " + d.Name + " consumes " + string(name)
			}
		}
		return "slice " + s.Name + " updated: device " + d.Name
	case 2: // a slice deleted
		i := rng.IntN(len(objs.Slices))
		*gone = append(*gone, objs.Slices[i])
		objs.Slices = slices.Delete(slices.Clone(objs.Slices), i, i+1)
		return "slice deleted"
	case 3: // a slice added again (as it was, or as a new object)
		if len(*gone) == 0 {
			return "nothing"
		}
		s := (*gone)[len(*gone)-1]
		*gone = (*gone)[:len(*gone)-1]
		if rng.IntN(2) == 0 {
			s = s.DeepCopy()
		}
		objs.Slices = append(slices.Clone(objs.Slices), s)
		return "slice added"
	case 4: // a claim released, or allocated again
		if len(*released) > 0 && rng.IntN(2) == 0 {
			c := (*released)[len(*released)-1]
			*released = (*released)[:len(*released)-1]
			objs.Claims = append(slices.Clone(objs.Claims), c)
			return "claim allocated"
		}
		for i, c := range objs.Claims {
			if c.Status.Allocation != nil && rng.IntN(3) == 0 {
				*released = append(*released, c)
				objs.Claims = slices.Delete(slices.Clone(objs.Claims), i, i+1)
				return "claim released"
			}
		}
		return "nothing"
	case 5: // a node relabelled or deleted
		i := rng.IntN(len(objs.Nodes))
		objs.Nodes = slices.Clone(objs.Nodes)
		if rng.IntN(3) == 0 {
			objs.Nodes = slices.Delete(objs.Nodes, i, i+1)
			return "node deleted"
		}
		n := objs.Nodes[i].DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels["step"] = fmt.Sprint(step)
		objs.Nodes[i] = n
		return "node relabelled"
	default: // a new pending claim, with a selector of its own
		exprs := []string{
			"device.attributes['gpu.nvidia.com'].profile == '" + profiles[rng.IntN(len(profiles))] + "'",
			"device.attributes['gpu.nvidia.com'].profile.startsWith('" + profiles[rng.IntN(len(profiles))][:2] + "')",
			"size(device.attributes['gpu.nvidia.com']) > " + fmt.Sprint(rng.IntN(6)), // not projectable
			// expensive (estimated cost above model.CheapSelectorCost):
			// stops once the build's CEL budget is spent
			"device.attributes['gpu.nvidia.com'].profile != '" + profiles[rng.IntN(len(profiles))] + "' && " + costly,
		}
		var src *resourceapi.ResourceClaim
		for _, c := range objs.Claims {
			if c.Status.Allocation == nil {
				src = c
			}
		}
		if src == nil {
			return "nothing"
		}
		c := src.DeepCopy()
		c.Name = fmt.Sprintf("new-%d", step)
		c.UID = ""
		for i := range c.Spec.Devices.Requests {
			if r := c.Spec.Devices.Requests[i].Exactly; r != nil {
				r.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: exprs[rng.IntN(len(exprs))]}}}
			}
		}
		objs.Claims = append(slices.Clone(objs.Claims), c)
		return "claim " + c.Name + " created"
	}
}

// costly is a CEL condition of two nested comprehensions over 20 ones.
var costly = func() string {
	l := "[" + strings.TrimSuffix(strings.Repeat("1,", 20), ",") + "]"
	return l + ".all(x, " + l + ".all(y, x+y > 0))"
}()

// firstDiff names the first claim whose candidates differ, or the field.
func firstDiff(a, b *model.Problem) string {
	if len(a.Claims) != len(b.Claims) {
		return fmt.Sprintf("%d claims vs %d", len(a.Claims), len(b.Claims))
	}
	for i := range a.Claims {
		if !reflect.DeepEqual(a.Claims[i], b.Claims[i]) {
			return "claim " + a.Claims[i].Key
		}
	}
	if a.CELCost != b.CELCost {
		return fmt.Sprintf("CEL cost %d vs %d", a.CELCost, b.CELCost)
	}
	return "another field"
}
