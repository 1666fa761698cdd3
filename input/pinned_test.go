package input

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pinnedNodesScan is PinnedNodes as the plain scan of every pod for every
// reservation: the reference the indexed one must equal.
func pinnedNodesScan(objs *Objects) map[string]string {
	out := map[string]string{}
	for _, c := range objs.Claims {
		for _, ref := range c.Status.ReservedFor {
			if ref.Resource != "pods" {
				continue
			}
			for _, p := range objs.Pods {
				if p.Namespace == c.Namespace && p.Name == ref.Name && p.Spec.NodeName != "" {
					out[c.Namespace+"/"+c.Name] = p.Spec.NodeName
				}
			}
		}
	}
	for _, p := range objs.Pods {
		if p.Spec.NodeName == "" {
			continue
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				out[p.Namespace+"/"+*rc.ResourceClaimName] = p.Spec.NodeName
			}
		}
		for _, st := range p.Status.ResourceClaimStatuses {
			if st.ResourceClaimName != nil {
				out[p.Namespace+"/"+*st.ResourceClaimName] = p.Spec.NodeName
			}
		}
	}
	return out
}

func TestPinnedNodes(t *testing.T) {
	claimName := func(s string) *string { return &s }
	// A claim reserved for a bound pod, one for a pending pod, one reserved
	// for a non-pod, one named by a bound pod's spec, and two pods of one
	// name (the later bound one counts).
	objs := &Objects{
		Claims: []*resourceapi.ResourceClaim{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c1"}, Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p1"}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c2"}, Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pending"}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c3"}, Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "jobs", Name: "p1"}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "c4"}, Status: resourceapi.ResourceClaimStatus{ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "twice"}}}},
		},
		Pods: []*corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1"}, Spec: corev1.PodSpec{NodeName: "n1"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "pending"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p5"}, Spec: corev1.PodSpec{NodeName: "n5", ResourceClaims: []corev1.PodResourceClaim{{Name: "x", ResourceClaimName: claimName("c5")}}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "twice"}, Spec: corev1.PodSpec{NodeName: "n6"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "twice"}, Spec: corev1.PodSpec{NodeName: "n7"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "twice"}},
		},
	}
	want := map[string]string{"a/c1": "n1", "a/c5": "n5", "b/c4": "n7"}
	if got := objs.PinnedNodes(); !maps.Equal(got, want) {
		t.Fatalf("PinnedNodes = %v, want %v", got, want)
	}
	// Random objects with few names, so that reservations, duplicates and
	// unbound pods meet: the same answer as the scan.
	rng := rand.New(rand.NewPCG(1, 2))
	name := func(prefix string) string { return fmt.Sprintf("%s%d", prefix, rng.IntN(4)) }
	for round := 0; round < 300; round++ {
		o := &Objects{}
		for i := rng.IntN(6); i > 0; i-- {
			c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: name("ns"), Name: name("c")}}
			for j := rng.IntN(3); j > 0; j-- {
				res := "pods"
				if rng.IntN(5) == 0 {
					res = "jobs"
				}
				c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: res, Name: name("p")})
			}
			o.Claims = append(o.Claims, c)
		}
		for i := rng.IntN(8); i > 0; i-- {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: name("ns"), Name: name("p")}}
			if rng.IntN(3) > 0 {
				p.Spec.NodeName = name("n")
			}
			if rng.IntN(3) == 0 {
				p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "r", ResourceClaimName: claimName(name("c"))})
			}
			if rng.IntN(3) == 0 {
				p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: "r", ResourceClaimName: claimName(name("c"))})
			}
			o.Pods = append(o.Pods, p)
		}
		if got, want := o.PinnedNodes(), pinnedNodesScan(o); !maps.Equal(got, want) {
			t.Fatalf("round %d: PinnedNodes = %v, the scan gives %v", round, got, want)
		}
	}
}
