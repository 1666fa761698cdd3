package k8s

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Projection: the claims gated pods will get, before they exist.
//
// A workload's pods are created at once, but the resourceclaim controller
// creates their template claims at its client's pace (about 10 per second
// with kube-controller-manager's defaults): a burst of 1,000 pods has all
// its claims only after about 100 s. A pass that solves only the claims
// that exist commits devices that later claims of the same burst need. So
// a pass also solves a stand-in for every template claim of a gated pod
// that is not created yet (the template's spec, named after the pod); the
// stand-ins are never written. What the solve decides for them is kept in
// a plan (plan.go): when the real claim appears, it gets the allocation of
// its stand-in, checked against the latest state, without another solve.
//
// Demand is keyed so that a stand-in and the real claim it becomes are the
// same unit: a template claim by its pod's UID and the pod's claim entry,
// any other claim by its UID.

// projectedUIDPrefix marks stand-in claims; a real UID never has it.
const projectedUIDPrefix = "projected:"

func podDemandKey(p *corev1.Pod, entry string) string { return "pod:" + string(p.UID) + "/" + entry }

func claimDemandKey(c *resourceapi.ResourceClaim) string { return "claim:" + string(c.UID) }

// isProjected reports whether c is a stand-in, not a real claim.
func isProjected(c *resourceapi.ResourceClaim) bool {
	return len(c.UID) > len(projectedUIDPrefix) && string(c.UID[:len(projectedUIDPrefix)]) == projectedUIDPrefix
}

// demand is what the gated pods and managed claims ask for.
type demand struct {
	// projected are stand-ins for template claims not created yet, in pod
	// order (pods sorted by name: deterministic).
	projected []*resourceapi.ResourceClaim
	// keys maps a claim's UID (real or stand-in) to its demand key; real
	// claims not listed are keyed by their UID (claimDemandKey).
	keys map[string]string
	// unknown counts gated pods with a claim that neither exists nor can
	// be projected (its template is not in the cache, or a claim named
	// with resourceClaimName is not created yet).
	unknown int
	// stale are gated pods created before the staleness cut-off whose
	// claims are still missing: they neither hold the batch window open
	// nor get stand-ins (one tenant's pod whose claim never comes must
	// not slow every allocation, nor keep devices planned forever).
	stale []stalePod
}

// stalePod is a gated pod given up on, and why.
type stalePod struct {
	pod *corev1.Pod
	why string
}

// key is the demand key of a real or projected claim.
func (d *demand) key(c *resourceapi.ResourceClaim) string {
	if k, ok := d.keys[string(c.UID)]; ok {
		return k
	}
	return claimDemandKey(c)
}

// projectDemand finds the claims the gated pods in namespace ("" = all) will
// get: existing template claims are keyed by pod, missing ones projected
// from their templates.
func projectDemand(s *Snapshot, namespace string) *demand {
	return projectDemandAt(s, namespace, time.Time{})
}

// projectDemandAt is projectDemand where gated pods created before
// staleBefore whose claims are still missing are stale (demand.stale);
// a zero staleBefore: none is.
func projectDemandAt(s *Snapshot, namespace string, staleBefore time.Time) *demand {
	d := &demand{keys: map[string]string{}}
	templates := map[string]*resourceapi.ResourceClaimTemplate{}
	for _, t := range s.Templates {
		templates[t.Namespace+"/"+t.Name] = t
	}
	claims := map[string]*resourceapi.ResourceClaim{}
	for _, c := range s.Claims {
		claims[claimKey(c)] = c
	}
	for _, p := range s.Pods {
		if !hasGate(p) || p.DeletionTimestamp != nil || (namespace != "" && p.Namespace != namespace) {
			continue
		}
		// (A pod without a creation time, which the API server always sets, is
		// never stale.)
		old := !staleBefore.IsZero() && !p.CreationTimestamp.IsZero() && p.CreationTimestamp.Time.Before(staleBefore)
		unknown := false
		var missing []string
		var stand, entries = []*resourceapi.ResourceClaim(nil), []string(nil)
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				if claims[p.Namespace+"/"+*rc.ResourceClaimName] == nil {
					unknown = true
					missing = append(missing, "claim "+*rc.ResourceClaimName)
				}
				continue
			}
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			i := slices.IndexFunc(p.Status.ResourceClaimStatuses, func(s corev1.PodResourceClaimStatus) bool { return s.Name == rc.Name })
			if i >= 0 {
				if n := p.Status.ResourceClaimStatuses[i].ResourceClaimName; n != nil {
					if c := claims[p.Namespace+"/"+*n]; c != nil {
						d.keys[string(c.UID)] = podDemandKey(p, rc.Name)
					}
				}
				continue // created (or not needed: a nil name)
			}
			t := templates[p.Namespace+"/"+*rc.ResourceClaimTemplateName]
			if t == nil {
				unknown = true
				missing = append(missing, "template "+*rc.ResourceClaimTemplateName)
				continue
			}
			stand, entries = append(stand, standIn(p, rc.Name, t)), append(entries, rc.Name)
			missing = append(missing, "the claim of entry "+rc.Name+" (not created from its template yet)")
		}
		if old && len(missing) > 0 {
			d.stale = append(d.stale, stalePod{p, strings.Join(missing, ", ")})
			continue
		}
		for i, c := range stand {
			d.keys[string(c.UID)] = podDemandKey(p, entries[i])
			d.projected = append(d.projected, c)
		}
		if unknown {
			d.unknown++
		}
	}
	return d
}

// standIn is the claim the resourceclaim controller will create for the
// pod's claim entry from template t: the template's spec, labels and
// annotations (the controller copies them). Its name holds a ':', which no
// real object name can, so it never collides with a claim.
func standIn(p *corev1.Pod, entry string, t *resourceapi.ResourceClaimTemplate) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         p.Namespace,
			Name:              p.Name + ":" + entry,
			UID:               types.UID(projectedUIDPrefix + string(p.UID) + "/" + entry),
			Labels:            t.Spec.Labels,
			Annotations:       t.Spec.Annotations,
			CreationTimestamp: p.CreationTimestamp,
		},
		Spec: *t.Spec.Spec.DeepCopy(),
	}
}
