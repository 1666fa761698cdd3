package k8s

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/model"
)

// Gated pods without claims (Options.PlacePods). The scheduler's scores
// do not see devices, so it spreads CPU-only pods over the nodes with
// free GPUs and strands them; drasat chooses such a pod's node by the
// fragmentation measure (frag.PlacePods), narrows the pod's required node
// affinity to that node (allowed on a gated pod since Kubernetes 1.27,
// KEP-3838) and removes the gate in the same update. The scheduler then
// binds it there, with its own filters as the last word.

const (
	// ReasonPlaced: drasat chose the node of a gated pod without claims.
	ReasonPlaced = "NodeChosen"
	// ReasonNoNode: a gated pod without claims fits on no node; it stays
	// gated until something changes.
	ReasonNoNode = "NoNodeFits"
)

// placeClaimless chooses nodes for the gated pods without claims, on the
// cluster as the pass's allocations (written) leave it, and ungates them.
func (r *Reconciler) placeClaimless(ctx context.Context, written map[string]*resourceapi.ResourceClaim, res *PassResult) error {
	if !r.Opts.PlacePods || r.Opts.DryRun {
		return nil
	}
	snap, err := r.Cache.Snapshot()
	if err != nil {
		return err
	}
	pods := r.claimlessPods(snap)
	if len(pods) == 0 {
		return nil
	}
	objs := objects(snap, nil)
	objs.Claims = overlay(objs.Claims, written)
	p, err := model.Build(ctx, objs, model.Options{Compat: r.Opts.Compat, Memo: r.selectors})
	if err != nil {
		return fmt.Errorf("build problem for pods without claims: %w", err)
	}
	m, err := frag.For(ctx, objs, p, r.workload)
	if err != nil {
		return fmt.Errorf("fragmentation measure for pods without claims: %w", err)
	}
	for _, pl := range frag.PlacePods(objs, p, m, pods) {
		if ctx.Err() != nil {
			return nil
		}
		if pl.Node != "" && r.Opts.Policy == alloc.Frag {
			// A CPU-only task is a shape of FGD's workload too.
			if r.workload == nil {
				r.workload = frag.NewWorkload()
			}
			r.workload.ObserveTask(nil, podCPU(pl.Pod))
		}
		if err := r.applyPlacement(ctx, pl, res); err != nil {
			return err
		}
	}
	return nil
}

// claimlessPods are the gated pods (in the namespace served) that use no
// claims, oldest first.
func (r *Reconciler) claimlessPods(snap *Snapshot) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range snap.Pods {
		if hasGate(p) && len(p.Spec.ResourceClaims) == 0 && p.Spec.NodeName == "" && p.DeletionTimestamp == nil &&
			(r.Opts.Namespace == "" || p.Namespace == r.Opts.Namespace) && !r.ungated[p.Namespace+"/"+p.Name] {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].CreationTimestamp, out[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// overlay replaces claims by this pass's writes of them and adds the
// allocated ones the list does not have yet.
func overlay(claims []*resourceapi.ResourceClaim, written map[string]*resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	if len(written) == 0 {
		return claims
	}
	out := make([]*resourceapi.ResourceClaim, 0, len(claims)+len(written))
	seen := map[string]bool{}
	for _, c := range claims {
		k := claimKey(c)
		seen[k] = true
		if w, ok := written[k]; ok && newer(w, c) {
			c = w
		}
		out = append(out, c)
	}
	keys := make([]string, 0, len(written))
	for k := range written {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if w := written[k]; !seen[k] && w.Status.Allocation != nil {
			out = append(out, w)
		}
	}
	return out
}

// applyPlacement writes one decision: the node narrowed into the pod's
// required node affinity and the gate removed, in one update; a pod left
// to the scheduler loses its gate only; a pod that fits nowhere stays
// gated with a Warning Event (once per reason).
func (r *Reconciler) applyPlacement(ctx context.Context, pl frag.PodPlacement, res *PassResult) error {
	p := pl.Pod
	key := p.Namespace + "/" + p.Name
	switch {
	case pl.Unmodelled:
		if err := r.removeGate(ctx, p); err != nil {
			return r.podWriteFailed(ctx, p, err, res)
		}
		r.gateRemoved(key, res)
		r.Log.Info("pod without claims left to the scheduler", zap.String("pod", key), zap.String("reason", pl.Why))
		if r.Recorder != nil {
			r.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonLeftToScheduler, "%s; scheduling gate %s removed, the scheduler places it", pl.Why, SchedulingGate)
		}
		return nil
	case pl.Node == "":
		rk := "nonode/" + string(p.UID)
		if r.reported[rk] != pl.Why {
			r.reported[rk] = pl.Why
			r.Log.Info("pod without claims fits on no node", zap.String("pod", key), zap.String("reason", pl.Why))
			if r.Recorder != nil {
				r.Recorder.Eventf(p, corev1.EventTypeWarning, ReasonNoNode, "%s; it stays gated (%s) until a node can take it", pl.Why, SchedulingGate)
			}
		}
		return nil
	}
	u := p.DeepCopy()
	pinToNode(u, pl.Node)
	u.Spec.SchedulingGates = slices.DeleteFunc(u.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
	wctx, done, err := r.startWrite(ctx)
	if err != nil {
		return err
	}
	r.Metrics.Writes.WithLabelValues("pod").Inc()
	_, err = r.Client.CoreV1().Pods(p.Namespace).Update(wctx, u, metav1.UpdateOptions{FieldManager: Component})
	done()
	if err != nil {
		return r.podWriteFailed(ctx, p, err, res)
	}
	delete(r.reported, "nonode/"+string(p.UID))
	r.gateRemoved(key, res)
	res.Placed++
	r.Log.Info("node chosen for pod without claims", zap.String("pod", key), zap.String("node", pl.Node))
	if r.Recorder != nil {
		r.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonPlaced, "node %s chosen (required node affinity on metadata.name); scheduling gate %s removed", pl.Node, SchedulingGate)
	}
	return nil
}

// podWriteFailed sorts a failed pod write: a conflict or a vanished pod is
// retried by the next pass, a refusal is reported once, anything else
// ends the pass.
func (r *Reconciler) podWriteFailed(ctx context.Context, p *corev1.Pod, err error, res *PassResult) error {
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(err, ErrFenced):
		return err
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		res.Requeue = true
		return nil
	case refused(err):
		r.skip(p, "Pod", fmt.Sprintf("narrowing the node affinity and removing the scheduling gate %s was refused: %v", SchedulingGate, err))
		return nil
	}
	return fmt.Errorf("place pod %s/%s: %w", p.Namespace, p.Name, err)
}

// pinToNode narrows pod's required node affinity to the node named: the
// requirement metadata.name In [node] is added to every term (terms are
// ORed, so each must carry it), or is the one term when there is none.
// Only additions, as the API server allows on a gated pod.
func pinToNode(pod *corev1.Pod, node string) {
	req := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	a := pod.Spec.Affinity
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	ns := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if ns == nil || len(ns.NodeSelectorTerms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req}}}}
		return
	}
	for i := range ns.NodeSelectorTerms {
		ns.NodeSelectorTerms[i].MatchFields = append(ns.NodeSelectorTerms[i].MatchFields, req)
	}
}

// claimPodCPU maps each claim a pending pod uses to that pod's CPU
// request, the CPU dimension of the look-ahead's shapes.
func claimPodCPU(snap *Snapshot) map[string]corev1.ResourceList {
	return podCPUByClaim(snap.Pods, func(p *corev1.Pod) bool { return p.Spec.NodeName == "" })
}

// podCPUByClaim is, per claim (namespace/name), the CPU request of the
// pod among pods that keep accepts (nil: all) that uses it.
func podCPUByClaim(pods []*corev1.Pod, keep func(*corev1.Pod) bool) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, p := range pods {
		if keep != nil && !keep(p) {
			continue
		}
		cpu := podCPU(p)
		for _, n := range model.PodClaimNames(p) {
			out[p.Namespace+"/"+n] = cpu
		}
	}
	return out
}

// podCPU is a pod's CPU request as a shape's requests (nil: none).
func podCPU(p *corev1.Pod) corev1.ResourceList {
	v := model.PodRequests(p)[corev1.ResourceCPU]
	if v <= 0 {
		return nil
	}
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(v, resource.DecimalSI)}
}
