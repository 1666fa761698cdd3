package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/model"
)

// withPods gives every pending claim of objs a pending pod (1, 2 or 4 CPUs,
// 4 to 32Gi) and every node cpus CPUs and 512Gi allocatable.
func withPods(objs *model.Objects, cpus int64, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x706f6473))
	for _, n := range objs.Nodes {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: resource.MustParse("110")}
	}
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			continue
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + c.Name, Namespace: c.Namespace}}
		p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity([]int64{1, 2, 4}[r.IntN(3)], resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", 4<<r.IntN(4))),
		}}}}
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(c.Name)}}
		objs.Pods = append(objs.Pods, p)
	}
}

// The MIG batches with a pod per claim and CPUs that bind: the result
// passes check/ (pod rules included). DRASAT_PODS_MIG=1 also runs
// 16x8/1,000 and 96 CPUs a node and logs the outcome and time of each
// (DRASAT_PODS_MIG_STAGES=1: and the stages' times).
func TestMIGWithPods(t *testing.T) {
	sizes := [][3]int{{8, 8, 300}}
	cpuss := []int64{48}
	if os.Getenv("DRASAT_PODS_MIG") != "" {
		sizes = append(sizes, [3]int{16, 8, 1000})
		cpuss = append(cpuss, 96)
	}
	for _, sz := range sizes {
		for _, cpus := range cpuss {
			objs := MIG(DefaultMIG(sz[0], sz[1], sz[2], 1))
			withPods(objs, cpus, 1)
			start := time.Now()
			p, err := model.Build(context.Background(), objs, model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := alloc.Run(context.Background(), p, alloc.Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			claims, err := alloc.Allocated(p, res)
			if err != nil {
				t.Fatal(err)
			}
			if err := check.Check(objs, claims, check.Options{}); err != nil {
				t.Fatalf("%dx%d/%d, %d CPUs a node: %v", sz[0], sz[1], sz[2], cpus, err)
			}
			if os.Getenv("DRASAT_PODS_MIG_STAGES") != "" {
				t.Logf("%+v", res.Stats.Stages)
			}
			t.Logf("%dx%d/%d, %d CPUs a node: admitted %d, bound %d, optimal %v, %.2fs", sz[0], sz[1], sz[2], cpus,
				res.Stats.Admitted, res.Stats.Bound, res.Stats.Optimal, took.Seconds())
		}
	}
}
