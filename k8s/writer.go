package k8s

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LiveOptions tune how the controller keeps up with a live cluster.
type LiveOptions struct {
	// WriteWorkers bounds the claim writes (and gate removals) in flight at
	// once; the client's QPS and burst bound their rate.
	WriteWorkers int
	// MaxWindow bounds the adaptive batching window: the latency it may add
	// to a claim while claims keep arriving (see window.go). 0 means 30 s:
	// a burst of template pods reaches the API at the resourceclaim
	// controller's pace (about 10 claims/s), and the optimiser's choice is
	// what arrived within the window.
	MaxWindow time.Duration
	// ReleaseWindow bounds the window while nothing but releases arrived
	// in it: the devices of departing pods are then solved for at most
	// this long after the first release, even while releases go on (see
	// window.go). 0 means DefaultReleaseWindow.
	ReleaseWindow time.Duration
}

// DefaultReleaseWindow: deleting a job's pods releases their claims at the
// resourceclaim controller's client rate, for tens of seconds when many
// leave (334 pods: releases over about 20 s in the load test), while the
// pending pods that fit on the freed devices idle. A solve after each
// release packs worse than one after all of them (docs/adapter.md,
// "Departures"); one every few seconds loses little (the simulation: 180
// admitted after one solve, 176–177 after four or eight) and keeps a pod
// that fits from waiting more than about 10 s.
const DefaultReleaseWindow = 4 * time.Second

func (o *LiveOptions) defaults(batchWindow time.Duration) {
	if o.WriteWorkers <= 0 {
		o.WriteWorkers = 8
	}
	if o.MaxWindow == 0 {
		o.MaxWindow = 30 * time.Second
	}
	o.MaxWindow = max(o.MaxWindow, batchWindow)
	if o.ReleaseWindow == 0 {
		o.ReleaseWindow = DefaultReleaseWindow
	}
}

// writeAll writes a solved batch: first every claim is re-checked against
// the latest cache plus the claims approved before it (all together in one
// check, which holds for each claim if it holds for all, since the checks
// only get stricter with more allocations; in turn, one claim at a time,
// only when that fails), then the approved claims are written by
// WriteWorkers in parallel, grouped by pod; a gated pod's gate is removed
// as soon as all its claims are written and verified, not after the pass.
func (r *Reconciler) writeAll(ctx context.Context, snap *Snapshot, todo []*resourceapi.ResourceClaim,
	written map[string]*resourceapi.ResourceClaim, res *PassResult) error {
	log := r.Log
	res.toWrite += len(todo)
	// What the re-checks below see at least: an allocation not in base
	// and not written by this pass is someone else's, made since.
	base := r.cachedAllocations()
	// Phase 1: approve.
	rechecking := time.Now()
	approved := map[string]*resourceapi.ResourceClaim{}
	var order []*resourceapi.ResourceClaim
	current := map[string]*resourceapi.ResourceClaim{}
	var unchanged []*resourceapi.ResourceClaim
	for _, c := range todo {
		key := claimKey(c)
		cur, err := r.Cache.Claims.ResourceClaims(c.Namespace).Get(c.Name)
		switch {
		case apierrors.IsNotFound(err):
			log.Info("claim deleted while solving", zap.String("claim", key))
			res.Requeue = true
			continue
		case err != nil:
			return err
		case cur.UID != c.UID || cur.ResourceVersion != c.ResourceVersion || !isPending(cur):
			log.Info("claim changed while solving; re-solving", zap.String("claim", key))
			r.Metrics.WriteConflicts.Inc()
			res.Requeue = true
			continue
		}
		current[key] = cur
		unchanged = append(unchanged, c)
	}
	// Devices free, counters not exceeded, selectors hold — against the
	// cache and everything approved so far (an approved claim whose write
	// then fails only made this check stricter). Checking one claim
	// builds the checker's view of every allocation, so a batch is
	// checked at once, and claim by claim only if it fails.
	together := len(unchanged) > 1 && r.checkAll(approved, unchanged) == nil
	for _, c := range unchanged {
		key := claimKey(c)
		if together {
			approved[key] = c
			order = append(order, c)
			continue
		}
		if err := r.checkWith(approved, c); err != nil {
			log.Warn("re-check failed; not writing", zap.String("claim", key), zap.Error(err))
			r.Metrics.CheckRejections.Inc()
			res.Requeue = true
			continue
		}
		approved[key] = c
		order = append(order, c)
	}

	r.Metrics.PhaseSeconds.WithLabelValues("recheck").Observe(time.Since(rechecking).Seconds())
	writing := time.Now()
	defer func() { r.Metrics.PhaseSeconds.WithLabelValues("write").Observe(time.Since(writing).Seconds()) }()
	// Pods waiting for claims of this batch.
	pw := newPodWaiter(snap, approved, r.Opts.Namespace)
	slices.SortStableFunc(order, func(a, b *resourceapi.ResourceClaim) int { return pw.rank(a) - pw.rank(b) })

	// Phase 2: write in parallel. Pods whose claims are all written go to
	// one ungater, which takes every pod ready by then as a group
	// (ungateGroup): one check of the group against the cluster, not one
	// per pod.
	var mu sync.Mutex
	var firstErr error
	jobs := make(chan *resourceapi.ResourceClaim)
	readyPods := make(chan readyPod, len(pw.pods)) // each pod is ready once
	ungaterDone := make(chan struct{})
	go func() {
		defer close(ungaterDone)
		for first := range readyPods {
			group := []readyPod{first}
		more:
			for {
				select {
				case p, ok := <-readyPods:
					if !ok {
						break more
					}
					group = append(group, p)
				default:
					break more
				}
			}
			r.ungateGroup(ctx, group, &mu, written, base, res)
		}
	}()
	var wg sync.WaitGroup
	for range min(r.Opts.WriteWorkers, max(len(order), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				key := claimKey(c)
				w, err := r.write(ctx, current[key], c.Status.Allocation)
				mu.Lock()
				if err != nil {
					if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
						log.Info("write conflict; re-solving", zap.String("claim", key), zap.Error(err))
						r.Metrics.WriteConflicts.Inc()
						res.Requeue = true
					} else if refused(err) {
						// This claim only (invalid, or refused by an admission
						// policy): the others are still written.
						r.skip(current[key], "ResourceClaim", fmt.Sprintf("writing its allocation was refused: %v", err))
					} else if firstErr == nil {
						firstErr = fmt.Errorf("write %s: %w", key, err)
					}
					pw.failed(key)
					mu.Unlock()
					continue
				}
				written[key] = w
				res.Allocated++
				delete(r.reported, string(w.UID))
				ready := pw.done(key)
				mu.Unlock()
				r.Metrics.ClaimsAllocated.Inc()
				log.Info("allocated", zap.String("claim", key), zap.String("devices", devices(w)))
				if r.Recorder != nil {
					r.Recorder.Eventf(w, corev1.EventTypeNormal, ReasonAllocated, "drasat allocated %s", devices(w))
				}
				for _, i := range ready {
					p, names := pw.pod(i)
					readyPods <- readyPod{p, names}
				}
			}
		}()
	}
	for i, c := range order {
		if ctx.Err() != nil {
			// Shutting down: unwritten claims stay pending, which is safe.
			res.Requeue = true
			break
		}
		if r.pastDeadline(i, order, pw) {
			// The pass has reached its target: the rest of the batch
			// stays pending and the next pass solves it again, with what
			// arrived meanwhile. The batch bounds size a pass from the
			// last one; this holds it when this one runs longer (a slower
			// solve, the first pass's cold caches).
			res.Deferred = len(order) - i
			res.Requeue = true
			r.Metrics.DeferredClaims.Add(float64(res.Deferred))
			if r.fair != nil {
				r.fair.deferred(order[i:])
			}
			log.Info("pass target reached; the rest of the batch is left to the next pass",
				zap.Int("started", i), zap.Int("deferred", res.Deferred), zap.Duration("target", r.passTarget()))
			break
		}
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			break
		}
		jobs <- c
	}
	close(jobs)
	wg.Wait()
	close(readyPods)
	<-ungaterDone
	return firstErr
}

// pastDeadline tells whether the pass stops writing before order[i]: it
// is past its deadline, at least minAdaptiveBatch claims are written (the
// write bound's floor: a pass always makes that much progress, however
// long its solve took) and order[i] starts another pod's claims (a pod's
// claims are written together or not at all).
func (r *Reconciler) pastDeadline(i int, order []*resourceapi.ResourceClaim, pw *podWaiter) bool {
	if r.passDeadline.IsZero() || i < minAdaptiveBatch || time.Now().Before(r.passDeadline) {
		return false
	}
	rank := pw.rank(order[i])
	return rank != pw.rank(order[i-1]) || rank == len(pw.pods)
}

// readyPod is a gated pod whose claims (names) this pass has all written.
type readyPod struct {
	pod   *corev1.Pod
	names []string
}

// podWaiter tracks the gated pods whose last missing claims are in the
// batch being written.
type podWaiter struct {
	pods    []*corev1.Pod
	names   [][]string
	missing []int            // claims of pod i not yet written
	byClaim map[string][]int // claim key -> pods waiting for it
	dead    []bool           // a claim's write failed
}

func newPodWaiter(snap *Snapshot, approved map[string]*resourceapi.ResourceClaim, namespace string) *podWaiter {
	byKey := map[string]*resourceapi.ResourceClaim{}
	for _, c := range snap.Claims {
		byKey[claimKey(c)] = c
	}
	pw := &podWaiter{byClaim: map[string][]int{}}
	for _, p := range snap.Pods {
		if !hasGate(p) || p.DeletionTimestamp != nil || (namespace != "" && p.Namespace != namespace) {
			continue
		}
		names, complete := podClaimNames(p)
		if !complete {
			continue
		}
		missing, ok, inBatch := 0, true, false
		for _, n := range names {
			k := p.Namespace + "/" + n
			if _, a := approved[k]; a {
				missing++
				inBatch = true
			} else if c := byKey[k]; c == nil || c.Status.Allocation == nil || c.DeletionTimestamp != nil {
				ok = false // some claim is neither allocated nor being written
			}
		}
		if !ok || !inBatch {
			continue
		}
		i := len(pw.pods)
		pw.pods, pw.names, pw.missing, pw.dead = append(pw.pods, p), append(pw.names, names), append(pw.missing, missing), append(pw.dead, false)
		for _, n := range names {
			k := p.Namespace + "/" + n
			if _, a := approved[k]; a {
				pw.byClaim[k] = append(pw.byClaim[k], i)
			}
		}
	}
	return pw
}

// rank orders claims so that a pod's claims are written together: by the
// first waiting pod, claims no pod waits for last.
func (pw *podWaiter) rank(c *resourceapi.ResourceClaim) int {
	if ps := pw.byClaim[claimKey(c)]; len(ps) > 0 {
		return ps[0]
	}
	return len(pw.pods)
}

// done records a written claim and returns the pods it completed.
func (pw *podWaiter) done(key string) []int {
	var ready []int
	for _, i := range pw.byClaim[key] {
		pw.missing[i]--
		if pw.missing[i] == 0 && !pw.dead[i] {
			ready = append(ready, i)
		}
	}
	return ready
}

func (pw *podWaiter) pod(i int) (*corev1.Pod, []string) { return pw.pods[i], pw.names[i] }

func (pw *podWaiter) failed(key string) {
	for _, i := range pw.byClaim[key] {
		pw.dead[i] = true
	}
}

// ungateGroup removes the gates of pods whose claims are all written, once
// the cache shows them (bounded by SettleTimeout) and the claims drasat
// allocated and no pod uses yet verify against everything else allocated
// (as the pass's final ungate step does). The group's claims are verified
// together (verifyAll: one check of the cluster for the group, claim by
// claim only if that fails), so a batch's ungating costs a check per group,
// not per pod. A pod it cannot ungate is left to that final step.
func (r *Reconciler) ungateGroup(ctx context.Context, group []readyPod, mu *sync.Mutex,
	written map[string]*resourceapi.ResourceClaim, base map[string]uint64, res *PassResult) {
	mine := map[string]*resourceapi.ResourceClaim{}
	mu.Lock()
	for _, g := range group {
		for _, n := range g.names {
			if w, ok := written[g.pod.Namespace+"/"+n]; ok {
				mine[g.pod.Namespace+"/"+n] = w
			}
		}
	}
	mu.Unlock()
	r.settle(ctx, mine)
	mu.Lock()
	all := make(map[string]*resourceapi.ResourceClaim, len(written))
	for k, w := range written {
		all[k] = w
	}
	mu.Unlock()
	// The claims this pass re-checked need no second check unless someone
	// else allocated since (the check is most of a pass's CPU: it
	// evaluates the claim's selectors on every device).
	foreign := r.foreignSince(base, all)
	// Each pod's claims to verify; a pod with a claim gone or no longer
	// allocated is left out.
	var pods []readyPod
	var check [][]*resourceapi.ResourceClaim
	var toVerify []*resourceapi.ResourceClaim
	listed := map[string]bool{}
pods:
	for _, g := range group {
		var cs []*resourceapi.ResourceClaim
		for _, n := range g.names {
			key := g.pod.Namespace + "/" + n
			c, ok := all[key]
			if cur, err := r.Cache.Claims.ResourceClaims(g.pod.Namespace).Get(n); err == nil && (!ok || !newer(c, cur)) {
				c = cur
			}
			if c == nil || c.Status.Allocation == nil || c.DeletionTimestamp != nil {
				continue pods
			}
			if c.Annotations[AllocatedByAnnotation] == "" || len(c.Status.ReservedFor) > 0 {
				continue
			}
			if w, mine := all[key]; mine && w.UID == c.UID && !foreign {
				continue
			}
			cs = append(cs, c)
			if !listed[key] {
				listed[key] = true
				toVerify = append(toVerify, c)
			}
		}
		pods, check = append(pods, g), append(check, cs)
	}
	failed := r.verifyAll(all, toVerify)
	withdrawn := map[string]bool{}
	var ungate []readyPod
	for i, g := range pods {
		ok := true
		for _, c := range check[i] {
			key := claimKey(c)
			err := failed[key]
			if err == nil {
				continue
			}
			ok = false
			if withdrawn[key] {
				continue
			}
			withdrawn[key] = true
			r.Log.Warn("allocation conflicts with one written by someone else; withdrawing it", zap.String("claim", key), zap.Error(err))
			r.Metrics.CheckRejections.Inc()
			werr := r.withdraw(ctx, c, err)
			mu.Lock()
			if werr == nil {
				res.Withdrawn++
				delete(written, key)
			}
			res.Requeue = true
			mu.Unlock()
		}
		if ok {
			ungate = append(ungate, g)
		}
	}
	// The gates, WriteWorkers at a time.
	jobs := make(chan readyPod)
	var wg sync.WaitGroup
	for range min(r.Opts.WriteWorkers, max(len(ungate), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := range jobs {
				r.ungateOne(ctx, g, mu, res)
			}
		}()
	}
	for _, g := range ungate {
		jobs <- g
	}
	close(jobs)
	wg.Wait()
}

// ungateOne removes one ready pod's gate and records it.
func (r *Reconciler) ungateOne(ctx context.Context, g readyPod, mu *sync.Mutex, res *PassResult) {
	p := g.pod
	err := r.removeGate(ctx, p)
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		// A conflict or anything else: the final ungate step or the next
		// pass tries again.
		r.Log.Info("could not remove gate yet", zap.String("pod", p.Namespace+"/"+p.Name), zap.Error(err))
		res.Requeue = true
		return
	}
	r.gateRemoved(p.Namespace+"/"+p.Name, res)
	r.Log.Info("scheduling gate removed", zap.String("pod", p.Namespace+"/"+p.Name), zap.Strings("claims", g.names))
	if r.Recorder != nil {
		r.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonUngated, "all %d claims allocated; scheduling gate %s removed", len(g.names), SchedulingGate)
	}
}

// removeGate drops drasat's scheduling gate with a resourceVersion-guarded
// update.
func (r *Reconciler) removeGate(ctx context.Context, p *corev1.Pod) error {
	u := p.DeepCopy()
	u.Spec.SchedulingGates = slices.DeleteFunc(u.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == SchedulingGate })
	wctx, done, err := r.startWrite(ctx)
	if err != nil {
		return err
	}
	defer done()
	r.Metrics.Writes.WithLabelValues("pod").Inc()
	_, err = r.Client.CoreV1().Pods(p.Namespace).Update(wctx, u, metav1.UpdateOptions{FieldManager: Component})
	return err
}

// gateRemoved records that the gate of pod key is gone: no later step or
// pass removes it again, and the pass and the metrics count it.
func (r *Reconciler) gateRemoved(key string, res *PassResult) {
	r.ungated[key] = true
	res.Ungated++
	r.Metrics.GatesRemoved.Inc()
}

// cachedAllocations maps each allocated claim in the cache to its
// allocation's hash.
func (r *Reconciler) cachedAllocations() map[string]uint64 {
	// Only the claims and pods, unsorted: allocations reads nothing else,
	// and the whole snapshot (every slice, sorted) is the cluster's size.
	claims, err := r.Cache.Claims.List(labels.Everything())
	if err != nil {
		return nil
	}
	pods, err := r.Cache.Pods.List(labels.Everything())
	if err != nil {
		return nil
	}
	return allocations(&Snapshot{Claims: claims, Pods: pods})
}

// verifyAll verifies allocated claims (verify) and returns the failures
// by claim key: all together first, which holds for each claim if it holds
// for all (a check only gets stricter with more allocations), then claim by
// claim only when that fails: one check of the cluster for a group, not one
// per claim.
func (r *Reconciler) verifyAll(written map[string]*resourceapi.ResourceClaim, cs []*resourceapi.ResourceClaim) map[string]error {
	if len(cs) == 0 || (len(cs) > 1 && r.checkAll(written, cs) == nil) {
		return nil
	}
	failed := map[string]error{}
	for _, c := range cs {
		if err := r.verify(written, c); err != nil {
			failed[claimKey(c)] = err
		}
	}
	return failed
}

// foreignSince reports whether the cache holds an allocation that is
// neither in base nor one of this pass's writes: someone else allocated
// (or changed an allocation, or a pod took a node's resources) since base
// was taken. Unsure means yes. A pod the scheduler bound since is not
// someone else's when it is this pass's own: every claim it uses was
// written by this pass with an allocation on one node, the node the pod
// was bound to (the re-check already placed it there with the batch). Each
// such bind counted as foreign, so every group of a streamed batch was
// verified against the whole cluster again.
func (r *Reconciler) foreignSince(base map[string]uint64, written map[string]*resourceapi.ResourceClaim) bool {
	if base == nil {
		return true
	}
	mine := make(map[string]bool, len(written))
	for _, w := range written {
		mine[string(w.UID)] = true
	}
	claims, err := r.Cache.Claims.List(labels.Everything())
	if err != nil {
		return true
	}
	pods, err := r.Cache.Pods.List(labels.Everything())
	if err != nil {
		return true
	}
	for _, p := range pods {
		if ownBind(p, written) {
			mine["pod:"+string(p.UID)] = true
		}
	}
	now := allocations(&Snapshot{Claims: claims, Pods: pods})
	for uid, h := range now {
		if h0, ok := base[uid]; (!ok || h0 != h) && !mine[uid] {
			return true
		}
	}
	return false
}

// ownBind reports whether pod p is bound to the one node that every claim
// it uses was allocated on by this pass (written).
func ownBind(p *corev1.Pod, written map[string]*resourceapi.ResourceClaim) bool {
	names, complete := podClaimNames(p)
	if p.Spec.NodeName == "" || !complete || len(names) == 0 {
		return false
	}
	for _, n := range names {
		w := written[p.Namespace+"/"+n]
		if w == nil || w.Status.Allocation == nil || allocationNode(w.Status.Allocation) != p.Spec.NodeName {
			return false
		}
	}
	return true
}

// allocationNode is the node an allocation's node selector names when it
// selects exactly one node by name, as node-local allocations do; "" for
// any other selector.
func allocationNode(a *resourceapi.AllocationResult) string {
	ns := a.NodeSelector
	if ns == nil || len(ns.NodeSelectorTerms) != 1 {
		return ""
	}
	t := ns.NodeSelectorTerms[0]
	if len(t.MatchExpressions) != 0 || len(t.MatchFields) != 1 {
		return ""
	}
	f := t.MatchFields[0]
	if f.Key != "metadata.name" || f.Operator != corev1.NodeSelectorOpIn || len(f.Values) != 1 {
		return ""
	}
	return f.Values[0]
}
