package k8s

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/model"
)

func TestPriorityWeight(t *testing.T) {
	for _, tt := range []struct {
		prio int32
		want int64
	}{{-5, 1}, {0, 1}, {1000, 301}, {1000000, 601}, {2000000000, 931}, {2147483647, 934}} {
		if got := PriorityWeight(tt.prio); got != tt.want {
			t.Errorf("PriorityWeight(%d) = %d, want %d", tt.prio, got, tt.want)
		}
	}
	prev := int64(0)
	for p := int32(0); p < 1<<30; p = p*2 + 1 {
		w := PriorityWeight(p)
		if w < prev || w > model.MaxWeight {
			t.Fatalf("PriorityWeight(%d) = %d: not monotone within [1, %d]", p, w, model.MaxWeight)
		}
		prev = w
	}
}

// A claim's weight follows its pods' priority, not what the tenant
// wrote; an annotation (which deploy/'s policy admits only where an
// admin allows) is kept; the cache's objects are not changed.
func TestWeighClaims(t *testing.T) {
	claim := func(name string, ann map[string]string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann}}
	}
	high := claim("high", nil)
	low := claim("low", nil)
	shared := claim("shared", nil)
	admin := claim("admin", map[string]string{model.WeightAnnotation: "7"})
	lone := claim("lone", nil)
	p := func(name string, prio int32, claims ...string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{Priority: ptr.To(prio)}}
		for _, c := range claims {
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: ptr.To(c)})
		}
		return pod
	}
	tmplPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t"}, Spec: corev1.PodSpec{Priority: ptr.To[int32](1000),
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")}}}}
	snap := &Snapshot{Pods: []*corev1.Pod{p("a", 1000000, "high", "shared"), p("b", 0, "low", "admin"), p("c", 1000, "shared"), tmplPod}}
	claims := []*resourceapi.ResourceClaim{high, low, shared, admin, lone}
	stand := []*resourceapi.ResourceClaim{claim("t:gpu", nil)}
	prio := podPriorities(snap)
	weighClaims(claims, prio)
	weighClaims(stand, prio)
	got := map[string]string{}
	for _, c := range append(claims, stand...) {
		got[c.Name] = c.Annotations[model.WeightAnnotation]
	}
	want := map[string]string{"high": "601", "low": "", "shared": "601", "admin": "7", "lone": "", "t:gpu": "301"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("claim %s weight %q, want %q", k, got[k], w)
		}
	}
	if high.Annotations != nil {
		t.Error("the cached claim was changed")
	}
}
