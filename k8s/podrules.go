package k8s

import (
	"context"
	"errors"
	"hash/fnv"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/drasat/drasat/model"
)

// Pods and their nodes (docs/semantics.md, "Pods"). The solve places a
// pod's claims only where the pod can run; what drasat does not model of
// a pod (inter-pod affinity, topology spread, volumes, host ports) it
// leaves to the kube-scheduler: such a pod's gate is removed without
// allocating, with an Event saying why. And the adapter watches itself:
// when another component (the kube-scheduler's DynamicResources
// PostFilter) deallocates a claim drasat allocated before any pod used
// it, drasat_allocations_undone_total counts it and the claim gets an
// Event. It must stay 0.

// Event reasons.
const (
	ReasonLeftToScheduler  = "LeftToScheduler"
	ReasonAllocationUndone = "AllocationUndone"
)

// leaveToScheduler removes the gate of every gated pod of p that drasat
// does not model, without allocating its claims.
func (r *Reconciler) leaveToScheduler(ctx context.Context, p *model.Problem, res *PassResult) {
	if r.Opts.DryRun {
		return
	}
	for _, pod := range p.Pods {
		key := pod.Key
		if pod.Unmodelled == "" || !hasGate(pod.Obj) || pod.Obj.DeletionTimestamp != nil || r.ungated[key] {
			continue
		}
		if err := r.removeGate(ctx, pod.Obj); err != nil {
			if errors.Is(err, ErrFenced) {
				res.Requeue = true
				return // no write may start now
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				r.Log.Warn("could not leave pod to the kube-scheduler", zap.String("pod", key), zap.Error(err))
			}
			res.Requeue = true
			continue
		}
		r.gateRemoved(key, res)
		r.Log.Info("pod left to the kube-scheduler", zap.String("pod", key), zap.String("why", pod.Unmodelled))
		if r.Recorder != nil {
			r.Recorder.Eventf(pod.Obj, corev1.EventTypeNormal, ReasonLeftToScheduler,
				"drasat does not model this pod (%s): scheduling gate %s removed without allocating its claims; the kube-scheduler allocates them", pod.Unmodelled, SchedulingGate)
		}
	}
}

// withdrawals remembers the claims drasat deallocated itself (withdraw),
// so that only others' deallocations count as undone.
type withdrawals struct {
	mu   sync.Mutex
	uids map[types.UID]bool
}

func (w *withdrawals) note(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.uids == nil {
		w.uids = map[types.UID]bool{}
	}
	w.uids[uid] = true
}

func (w *withdrawals) take(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	ok := w.uids[uid]
	delete(w.uids, uid)
	return ok
}

// claimUpdated sees every claim update (from the informer): an
// allocation drasat wrote that is gone while no pod had reserved the
// claim was undone by someone else.
func (r *Reconciler) claimUpdated(old, cur *resourceapi.ResourceClaim) {
	if old.Status.Allocation == nil || cur.Status.Allocation != nil || len(old.Status.ReservedFor) > 0 || old.Annotations[AllocatedByAnnotation] == "" {
		return
	}
	if r.withdrawn.take(old.UID) {
		return
	}
	r.Metrics.AllocationsUndone.Inc()
	r.Log.Warn("an allocation drasat wrote was removed before any pod used it", zap.String("claim", claimKey(cur)), zap.String("devices", devices(old)))
	if r.Recorder != nil {
		r.Recorder.Eventf(cur, corev1.EventTypeWarning, ReasonAllocationUndone,
			"the allocation drasat wrote (%s) was removed by another component before any pod used it", devices(old))
	}
}

// nodeChanged tells whether a node update matters to the pod rules or
// the devices: labels, cordon, taints, allocatable.
func nodeChanged(o, n *corev1.Node) bool {
	return !reflect.DeepEqual(o.Labels, n.Labels) || o.Spec.Unschedulable != n.Spec.Unschedulable ||
		!reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) || !reflect.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
}

// podRulesParts feeds the inventory fingerprint (fairness.go) what the pod
// rules read of nodes besides labels: cordon, taints and allocatable. A
// claim parked because its pods fit nowhere is tried again when one of
// these changes, or when a pod leaves a node (podsHeld).
func podRulesParts(s *Snapshot, w func(parts ...string)) {
	for _, n := range s.Nodes {
		w("u", n.Name, strconv.FormatBool(n.Spec.Unschedulable))
		for _, t := range n.Spec.Taints {
			w(t.Key, t.Value, string(t.Effect))
		}
		names := make([]string, 0, len(n.Status.Allocatable))
		for r := range n.Status.Allocatable {
			names = append(names, string(r))
		}
		slices.Sort(names)
		for _, r := range names {
			q := n.Status.Allocatable[corev1.ResourceName(r)]
			w(r, q.String())
		}
	}
}

// podsHeld adds to the allocations fairness tracks the pods that hold
// node resources (bound or nominated, not finished), by node: one that
// goes away is a release, as a released allocation is.
func podsHeld(s *Snapshot, now map[string]uint64) {
	for _, p := range s.Pods {
		node := p.Spec.NodeName
		if node == "" {
			node = p.Status.NominatedNodeName
		}
		if node == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(node))
		now["pod:"+string(p.UID)] = h.Sum64()
	}
}
