package k8s

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// hasGate reports whether the pod carries drasat's scheduling gate.
func hasGate(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
}

// isManaged reports whether a standalone claim is labelled for drasat.
func isManaged(c *resourceapi.ResourceClaim) bool { return c.Labels[ManagedLabel] == "true" }

// isPending: not allocated and not being deleted.
func isPending(c *resourceapi.ResourceClaim) bool {
	return c.Status.Allocation == nil && c.DeletionTimestamp == nil
}

// podClaimNames returns the names of the claims a pod uses, resolving
// template claims through status.resourceClaimStatuses (filled in by the
// resourceclaim controller once it has created them). complete is false
// while a template claim has not been created yet.
func podClaimNames(p *corev1.Pod) (names []string, complete bool) {
	complete = true
	for _, rc := range p.Spec.ResourceClaims {
		switch {
		case rc.ResourceClaimName != nil:
			names = append(names, *rc.ResourceClaimName)
		case rc.ResourceClaimTemplateName != nil:
			i := slices.IndexFunc(p.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == rc.Name })
			switch {
			case i < 0:
				complete = false
			case p.Status.ResourceClaimStatuses[i].ResourceClaimName != nil:
				names = append(names, *p.Status.ResourceClaimStatuses[i].ResourceClaimName)
			}
		}
	}
	return names, complete
}

// ours returns the pending claims drasat is responsible for, oldest first:
// those of gated pods in the namespace, and standalone claims labelled
// drasat.dev/managed=true in it.
func ours(s *Snapshot, namespace string) []*resourceapi.ResourceClaim {
	byKey := map[string]*resourceapi.ResourceClaim{}
	for _, c := range s.Claims {
		byKey[claimKey(c)] = c
	}
	seen := map[string]bool{}
	var out []*resourceapi.ResourceClaim
	add := func(c *resourceapi.ResourceClaim) {
		if c == nil || seen[claimKey(c)] || !isPending(c) || (namespace != "" && c.Namespace != namespace) {
			return
		}
		seen[claimKey(c)] = true
		out = append(out, c)
	}
	for _, p := range s.Pods {
		if !hasGate(p) || p.DeletionTimestamp != nil {
			continue
		}
		names, _ := podClaimNames(p)
		for _, n := range names {
			add(byKey[p.Namespace+"/"+n])
		}
	}
	for _, c := range s.Claims {
		if isManaged(c) && !strings.HasPrefix(c.Annotations[UnallocatableAnnotation], unusedReason) {
			add(c)
		}
	}
	slices.SortStableFunc(out, func(a, b *resourceapi.ResourceClaim) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		switch ka, kb := claimKey(a), claimKey(b); {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return out
}
