package k8s

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// With UngateAfter, a pod drasat could not allocate for that long is
// handed to the scheduler (its gate removed, other gates kept); a younger
// one stays gated; without it nothing is handed over.
func TestHandOver(t *testing.T) {
	for _, after := range []time.Duration{0, time.Minute} {
		old := gatedPod("old", "big")
		old.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
		young := gatedPod("young", "big2")
		young.CreationTimestamp = metav1.NewTime(time.Now())
		e := newEnv(t, Options{UngateAfter: after}, node("n1"), slice("n1", 1), class(), claim("big", 4, nil), claim("big2", 4, nil), old, young)
		if _, err := e.r.Pass(context.Background()); err != nil {
			t.Fatal(err)
		}
		o, y := e.pod(t, "old"), e.pod(t, "young")
		if hasGate(o) != (after == 0) {
			t.Errorf("UngateAfter %s: old pod gated = %v", after, hasGate(o))
		}
		if len(o.Spec.SchedulingGates) == 0 {
			t.Errorf("UngateAfter %s: the other gate was removed too", after)
		}
		if !hasGate(y) {
			t.Errorf("UngateAfter %s: the young pod was handed over", after)
		}
	}
}
