package k8s

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// freshSnapshot is what Snapshot gave before it kept lists: every lister
// listed and sorted, nothing derived kept.
func freshSnapshot(t *testing.T, c *Cache) *Snapshot {
	t.Helper()
	s := &Snapshot{}
	var err error
	s.Claims, _ = c.Claims.List(labels.Everything())
	s.Pods, _ = c.Pods.List(labels.Everything())
	if s.Slices, err = c.Slices.List(labels.Everything()); err != nil {
		t.Fatal(err)
	}
	s.Classes, _ = c.Classes.List(labels.Everything())
	s.Nodes, _ = c.Nodes.List(labels.Everything())
	s.TaintRules, _ = c.TaintRules.List(labels.Everything())
	s.Templates, _ = c.Templates.List(labels.Everything())
	sort.Slice(s.Slices, func(i, j int) bool { return s.Slices[i].Name < s.Slices[j].Name })
	sort.Slice(s.Classes, func(i, j int) bool { return s.Classes[i].Name < s.Classes[j].Name })
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	sort.Slice(s.TaintRules, func(i, j int) bool { return s.TaintRules[i].Name < s.TaintRules[j].Name })
	sort.Slice(s.Templates, func(i, j int) bool {
		return s.Templates[i].Namespace+"/"+s.Templates[i].Name < s.Templates[j].Namespace+"/"+s.Templates[j].Name
	})
	sort.Slice(s.Claims, func(i, j int) bool { return claimKey(s.Claims[i]) < claimKey(s.Claims[j]) })
	sort.Slice(s.Pods, func(i, j int) bool {
		return s.Pods[i].Namespace+"/"+s.Pods[i].Name < s.Pods[j].Namespace+"/"+s.Pods[j].Name
	})
	return s
}

// sameSnapshot: the same objects (pointers) in the same order, and the same
// fingerprint and counter-free devices as computed from the lists.
func sameSnapshot(got, want *Snapshot) error {
	for _, x := range []struct {
		kind string
		a, b []any
	}{
		{"slices", anys(got.Slices), anys(want.Slices)}, {"classes", anys(got.Classes), anys(want.Classes)},
		{"nodes", anys(got.Nodes), anys(want.Nodes)}, {"taint rules", anys(got.TaintRules), anys(want.TaintRules)},
		{"templates", anys(got.Templates), anys(want.Templates)}, {"claims", anys(got.Claims), anys(want.Claims)},
		{"pods", anys(got.Pods), anys(want.Pods)},
	} {
		if !slices.Equal(x.a, x.b) {
			return fmt.Errorf("%s: %d kept, %d listed, or other objects", x.kind, len(x.a), len(x.b))
		}
	}
	if a, b := inventoryFingerprint(got), computeInventoryFingerprint(want); a != b {
		return fmt.Errorf("fingerprint %x kept, %x computed", a, b)
	}
	fresh := counterFreeDevices(want)
	if got.derived == nil || !slices.Equal(got.derived.counterFree, fresh) {
		return fmt.Errorf("counter-free devices kept differ from %v", fresh)
	}
	return nil
}

func anys[T any](l []*T) []any {
	out := make([]any, len(l))
	for i, x := range l {
		out[i] = x
	}
	return out
}

// TestKeptSnapshotEqualsListed: over random sequences of events on the kept
// kinds (slices, classes, nodes, taint rules, templates: created, changed,
// deleted), once the informers have delivered them, a snapshot from the
// kept lists and derived data is the snapshot listed and computed afresh.
func TestKeptSnapshotEqualsListed(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, Options{})
	c := e.r.Cache
	rng := rand.New(rand.NewPCG(7, 11))
	cl := e.client
	for step := range 120 {
		i := rng.IntN(6)
		switch rng.IntN(6) {
		case 0: // slice: create, change its devices, or delete
			name := fmt.Sprintf("s%d", i)
			s := slice(fmt.Sprintf("n%d", i), 1+rng.IntN(3))
			s.Name = name
			if rng.IntN(2) == 0 {
				s.Spec.Devices[0].ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: "x"}}
			}
			old, err := cl.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				_, err = cl.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
			case rng.IntN(3) == 0:
				err = cl.ResourceV1().ResourceSlices().Delete(ctx, name, metav1.DeleteOptions{})
			default:
				s.ResourceVersion = old.ResourceVersion
				_, err = cl.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
		case 1: // node: create, relabel (or a status-only update), delete
			name := fmt.Sprintf("n%d", i)
			old, err := cl.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				_, err = cl.CoreV1().Nodes().Create(ctx, node(name), metav1.CreateOptions{})
			case rng.IntN(3) == 0:
				err = cl.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
			case rng.IntN(2) == 0:
				old.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Time{Time: time.Unix(int64(step), 0)}}}
				_, err = cl.CoreV1().Nodes().UpdateStatus(ctx, old, metav1.UpdateOptions{})
			default:
				old.Labels["zone"] = fmt.Sprint(rng.IntN(3))
				_, err = cl.CoreV1().Nodes().Update(ctx, old, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
		case 2: // class
			name := fmt.Sprintf("c%d", i)
			if _, err := cl.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{}); err != nil {
				d := class()
				d.Name = name
				_, err = cl.ResourceV1().DeviceClasses().Create(ctx, d, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			} else if err := cl.ResourceV1().DeviceClasses().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		case 3: // taint rule
			name := fmt.Sprintf("t%d", i)
			if _, err := cl.ResourceV1().DeviceTaintRules().Get(ctx, name, metav1.GetOptions{}); err != nil {
				r := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.DeviceTaintRuleSpec{
					DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(driver)},
					Taint:          resourceapi.DeviceTaint{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}}
				if _, err := cl.ResourceV1().DeviceTaintRules().Create(ctx, r, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			} else if err := cl.ResourceV1().DeviceTaintRules().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		case 5: // a claim and a pod in namespaces whose names sort apart from ns/name
			ns := []string{"a", "a-b", "a.b", "ab"}[rng.IntN(4)]
			name := fmt.Sprintf("x%d", i)
			if _, err := cl.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				c := claim(name, 1, nil)
				c.Namespace = ns
				if _, err := cl.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				p := gatedPod(name, name)
				p.Namespace = ns
				if _, err := cl.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		case 4: // template
			name := fmt.Sprintf("tmpl%d", i)
			if _, err := cl.ResourceV1().ResourceClaimTemplates("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
				tm := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
				if _, err := cl.ResourceV1().ResourceClaimTemplates("default").Create(ctx, tm, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			} else if err := cl.ResourceV1().ResourceClaimTemplates("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// Once the event is delivered, kept equals listed.
		var last error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			got, err := c.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if last = sameSnapshot(got, freshSnapshot(t, c)); last == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("step %d: %v", step, last)
			}
		}
	}
}
