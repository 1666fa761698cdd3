package k8s

import (
	"context"
	"fmt"
	"sort"

	"github.com/drasat/drasat/input"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// listPage is the page size of ListObjects (the API server's default
// limit for paginated lists is 500 too).
const listPage = 500

// ListObjects reads what an allocation needs from the API server, as the
// controller's caches hold it: ResourceSlices, DeviceClasses, Nodes, and
// ResourceClaims and Pods of every namespace (allocated claims anywhere use
// devices; pods tell which node a reserved claim is on). Lists are paged,
// and sorted by name so that the same cluster gives the same input.
func ListObjects(ctx context.Context, client kubernetes.Interface) (*input.Objects, error) {
	objs := &input.Objects{}
	err := pages(ctx, "ResourceSlices", func(o metav1.ListOptions) (string, error) {
		l, err := client.ResourceV1().ResourceSlices().List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range l.Items {
			objs.Slices = append(objs.Slices, &l.Items[i])
		}
		return l.Continue, nil
	})
	if err == nil {
		err = pages(ctx, "DeviceClasses", func(o metav1.ListOptions) (string, error) {
			l, err := client.ResourceV1().DeviceClasses().List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				objs.Classes = append(objs.Classes, &l.Items[i])
			}
			return l.Continue, nil
		})
	}
	if err == nil {
		err = pages(ctx, "ResourceClaims", func(o metav1.ListOptions) (string, error) {
			l, err := client.ResourceV1().ResourceClaims("").List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				objs.Claims = append(objs.Claims, &l.Items[i])
			}
			return l.Continue, nil
		})
	}
	if err == nil {
		err = pages(ctx, "Nodes", func(o metav1.ListOptions) (string, error) {
			l, err := client.CoreV1().Nodes().List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				objs.Nodes = append(objs.Nodes, &l.Items[i])
			}
			return l.Continue, nil
		})
	}
	if err == nil {
		err = pages(ctx, "Pods", func(o metav1.ListOptions) (string, error) {
			l, err := client.CoreV1().Pods("").List(ctx, o)
			if err != nil {
				return "", err
			}
			for i := range l.Items {
				// Only pods that use claims matter.
				if len(l.Items[i].Spec.ResourceClaims) > 0 {
					objs.Pods = append(objs.Pods, &l.Items[i])
				}
			}
			return l.Continue, nil
		})
	}
	if err != nil {
		return nil, err
	}
	sort.Slice(objs.Claims, func(i, j int) bool { return claimKey(objs.Claims[i]) < claimKey(objs.Claims[j]) })
	sort.Slice(objs.Slices, func(i, j int) bool { return objs.Slices[i].Name < objs.Slices[j].Name })
	sort.Slice(objs.Classes, func(i, j int) bool { return objs.Classes[i].Name < objs.Classes[j].Name })
	sort.Slice(objs.Nodes, func(i, j int) bool { return objs.Nodes[i].Name < objs.Nodes[j].Name })
	sort.Slice(objs.Pods, func(i, j int) bool { return podKey(objs.Pods[i]) < podKey(objs.Pods[j]) })
	return objs, nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func pages(ctx context.Context, what string, list func(metav1.ListOptions) (string, error)) error {
	o := metav1.ListOptions{Limit: listPage}
	for {
		next, err := list(o)
		if err != nil {
			return fmt.Errorf("listing %s: %w", what, err)
		}
		if next == "" || ctx.Err() != nil {
			return ctx.Err()
		}
		o.Continue = next
	}
}

// LastDecision is what drasat last recorded for a claim: its annotations
// and its latest Event (reasons Allocated, Unallocatable,
// AllocationWithdrawn, SkippedByDrasat).
type LastDecision struct {
	AllocatedBy   string `json:"allocatedBy,omitempty"`
	Unallocatable string `json:"unallocatable,omitempty"`
	// GatedPods are the pods that use the claim and wait for drasat (they
	// carry its scheduling gate).
	GatedPods []string `json:"gatedPods,omitempty"`
	// Event is drasat's latest Event on the claim: when, reason, message.
	Event *DecisionEvent `json:"event,omitempty"`
}

// DecisionEvent is one of drasat's Events on a claim.
type DecisionEvent struct {
	Time    metav1.Time `json:"time"`
	Reason  string      `json:"reason"`
	Message string      `json:"message"`
	Count   int32       `json:"count,omitempty"`
}

// Decision collects drasat's last decision on claim from the objects (its
// annotations, gated pods) and, with a client, from its Events.
func Decision(ctx context.Context, client kubernetes.Interface, objs *input.Objects, claim *resourceapi.ResourceClaim) (*LastDecision, error) {
	d := &LastDecision{AllocatedBy: claim.Annotations[AllocatedByAnnotation], Unallocatable: claim.Annotations[UnallocatableAnnotation]}
	for _, p := range objs.Pods {
		if p.Namespace != claim.Namespace || !hasGate(p) {
			continue
		}
		names, _ := podClaimNames(p)
		for _, n := range names {
			if n == claim.Name {
				d.GatedPods = append(d.GatedPods, podKey(p))
				break
			}
		}
	}
	if client != nil {
		l, err := client.CoreV1().Events(claim.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=ResourceClaim,involvedObject.name=" + claim.Name})
		if err != nil {
			return nil, fmt.Errorf("events of claim %s: %w", claimKey(claim), err)
		}
		for _, e := range l.Items {
			if e.Source.Component != Component && e.ReportingController != Component {
				continue
			}
			if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != claim.UID {
				continue
			}
			t := e.LastTimestamp
			if t.IsZero() {
				t = metav1.NewTime(e.EventTime.Time)
			}
			if d.Event == nil || d.Event.Time.Before(&t) {
				d.Event = &DecisionEvent{Time: t, Reason: e.Reason, Message: e.Message, Count: e.Count}
			}
		}
	}
	if d.AllocatedBy == "" && d.Unallocatable == "" && len(d.GatedPods) == 0 && d.Event == nil {
		return nil, nil
	}
	return d, nil
}
