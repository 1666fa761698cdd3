//go:build e2eload

package e2e

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/k8s"
)

// TestInformerCacheMemory (build tag e2eload) states what the controller's
// informer caches hold per object: a drasat cache (k8s.NewCache, its
// transform included) runs in this process while the objects of the scale
// test's cluster are created kind by kind, SCALE_NODES nodes (default 200):
// the Nodes, their MIG ResourceSlices, the claims already allocated, then
// one pending claim and one gated pod using it per GPU. After each kind,
// once the cache holds every object, the live heap (after a GC) grows by
// what the cache keeps of them; the log gives bytes per object and per
// device.
func TestInformerCacheMemory(t *testing.T) {
	nodes := envInt(t, "SCALE_NODES", 200)
	insts, err := bench.Generate("mig", bench.Size{Nodes: nodes, GPUs: 8, Claims: nodes * 8}, 1, bench.GenerateOptions{})
	must(t, err)
	objs := insts[0].Objs
	c := newCluster(t)
	cfg := *c.adminCfg
	cfg.QPS, cfg.Burst = 1000, 2000
	fast := kubernetes.NewForConfigOrDie(&cfg)
	const ns = "mem"
	c.namespace(ns)
	for _, dc := range objs.Classes {
		dc = dc.DeepCopy()
		dc.ResourceVersion = ""
		_, err := fast.ResourceV1().DeviceClasses().Create(context.Background(), dc, metav1.CreateOptions{})
		must(t, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache := k8s.NewCache(c.admin, k8s.Options{})
	cache.Start(ctx)
	if !cache.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// step creates n objects of a kind, waits until the cache holds
	// them all, and logs what the heap grew by.
	step := func(kind string, n, devices int, create func(i int) error, cached func() int) {
		before := heap()
		parallel(t, n, create)
		c.eventually(kind+" in the cache", 5*time.Minute, func() (bool, error) { return cached() >= n, nil })
		grown := float64(heap()) - float64(before)
		per := fmt.Sprintf("%.0f bytes per object", grown/float64(n))
		if devices > 0 {
			per += fmt.Sprintf(", %.0f per device (%d devices)", grown/float64(devices), devices)
		}
		t.Logf("%d %s: the cache grew by %.1f MB, %s", n, kind, grown/1e6, per)
	}
	step("Nodes", len(objs.Nodes), 0, func(i int) error {
		n := objs.Nodes[i].DeepCopy()
		n.ResourceVersion = ""
		_, err := fast.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
		return err
	}, func() int { l, _ := cache.Nodes.List(labels.Everything()); return len(l) })
	devices := 0
	for _, s := range objs.Slices {
		devices += len(s.Spec.Devices)
	}
	step("ResourceSlices", len(objs.Slices), devices, func(i int) error {
		s := objs.Slices[i].DeepCopy()
		s.ResourceVersion = ""
		_, err := fast.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{})
		return err
	}, func() int { l, _ := cache.Slices.List(labels.Everything()); return len(l) })
	var inUse, pending []*resourceapi.ResourceClaim
	for _, cl := range objs.Claims {
		if cl.Status.Allocation != nil {
			inUse = append(inUse, cl)
		} else {
			pending = append(pending, cl)
		}
	}
	allocated := func() int {
		l, _ := cache.Claims.List(labels.Everything())
		n := 0
		for _, cl := range l {
			if cl.Status.Allocation != nil {
				n++
			}
		}
		return n
	}
	step("allocated ResourceClaims", len(inUse), 0, func(i int) error {
		cl := inUse[i]
		u, err := fast.ResourceV1().ResourceClaims(ns).Create(context.Background(),
			&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: ns}, Spec: cl.Spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		u.Status.Allocation = cl.Status.Allocation.DeepCopy()
		_, err = fast.ResourceV1().ResourceClaims(ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
		return err
	}, allocated)
	step("pending ResourceClaims", len(pending), 0, func(i int) error {
		_, err := fast.ResourceV1().ResourceClaims(ns).Create(context.Background(),
			&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: pending[i].Name, Namespace: ns}, Spec: pending[i].Spec}, metav1.CreateOptions{})
		return err
	}, func() int { l, _ := cache.Claims.List(labels.Everything()); return len(l) - len(inUse) })
	step("gated Pods", len(pending), 0, func(i int) error {
		p := pod(ns, pending[i].Name, true, byName("gpu", pending[i].Name))
		_, err := fast.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		return err
	}, func() int { l, _ := cache.Pods.List(labels.Everything()); return len(l) })
}
