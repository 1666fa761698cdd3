package k8s

import (
	"math"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/model"
)

// Claim weights (the max-claims objective counts a claim of weight w as w
// claims) come from something a tenant does not control: the priority of
// the pods that use the claim, which the API server resolves from their
// PriorityClass, as the scheduler's preemption uses it. The
// drasat.dev/weight annotation overrides it; deploy/'s policy
// drasat-weight refuses the annotation outside namespaces an
// administrator labelled drasat.dev/weight-allowed=true.

// PriorityWeight maps a pod priority to a claim weight: 1 for priority 0
// or less (the default), rising with the priority's order of magnitude
// (1 + 100 x log10(1 + priority)), at most model.MaxWeight: 1000 -> 301,
// 1,000,000 -> 601, system-cluster-critical (2,000,000,000) -> 931.
func PriorityWeight(priority int32) int64 {
	if priority <= 0 {
		return 1
	}
	return min(1+int64(100*math.Log10(1+float64(priority))), model.MaxWeight)
}

// podPriorities maps each claim key (namespace/name; for a claim not
// created yet, its stand-in's namespace/pod:entry) to the highest
// priority of the pods that use it.
func podPriorities(s *Snapshot) map[string]int32 {
	out := map[string]int32{}
	note := func(key string, p int32) {
		if q, ok := out[key]; !ok || p > q {
			out[key] = p
		}
	}
	for _, p := range s.Pods {
		if p.Spec.Priority == nil {
			continue
		}
		prio := *p.Spec.Priority
		names, _ := podClaimNames(p)
		for _, n := range names {
			note(p.Namespace+"/"+n, prio)
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName != nil {
				note(p.Namespace+"/"+p.Name+":"+rc.Name, prio)
			}
		}
	}
	return out
}

// weighClaims replaces the pending claims without a weight annotation by
// copies whose annotation holds their pods' PriorityWeight (when it is
// not the default 1); the cache's objects are never changed.
func weighClaims(claims []*resourceapi.ResourceClaim, prio map[string]int32) {
	for i, c := range claims {
		if c.Status.Allocation != nil {
			continue
		}
		if _, ok := c.Annotations[model.WeightAnnotation]; ok {
			continue
		}
		p, ok := prio[claimKey(c)]
		if !ok {
			continue
		}
		if w := PriorityWeight(p); w != 1 {
			u := c.DeepCopy()
			if u.Annotations == nil {
				u.Annotations = map[string]string{}
			}
			u.Annotations[model.WeightAnnotation] = strconv.FormatInt(w, 10)
			claims[i] = u
		}
	}
}
