package k8s

import (
	"context"
	"errors"
	"fmt"
	"github.com/go-logr/zapr"
	"io"
	"k8s.io/klog/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/hold"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/reserve"
)

// Event reasons.
const (
	ReasonAllocated     = "Allocated"
	ReasonUnallocatable = "Unallocatable"
	ReasonWithdrawn     = "AllocationWithdrawn"
	ReasonUngated       = "SchedulingGateRemoved"
	ReasonSkipped       = "SkippedByDrasat"
	ReasonStale         = "ClaimsMissing"
)

// Reconciler runs allocation passes: solve the pending claims drasat is
// responsible for, write the results, remove gates.
type Reconciler struct {
	Client   kubernetes.Interface
	Cache    *Cache
	Opts     Options
	Log      *zap.Logger
	Metrics  *Metrics
	Recorder record.EventRecorder // may be nil
	// DryRunOut receives, with Opts.DryRun, the claims that would be
	// written, as YAML.
	DryRunOut io.Writer

	// AfterSolve, when set, is called after a batch is solved and before
	// anything is written, with the claims about to be written (a test
	// hook: the e2e suite modifies and deletes claims there).
	AfterSolve func(claims []*resourceapi.ResourceClaim)

	// fair picks each pass's batch and parks claims that cannot fit until
	// something relevant changes (fairness.go).
	fair *fairness

	// ungated: pods whose gate this pass already removed (writer.go).
	ungated map[string]bool
	// withdrawn: claims this process deallocated itself (podrules.go).
	withdrawn withdrawals

	// reported remembers the last unallocatable reason per claim UID, so an
	// Event is emitted once per reason rather than once per pass.
	reported map[string]string
	// workload is the frag policy's distribution of claim shapes, learnt
	// from the claims this controller allocated, started from those
	// running when it started and Options.Workload (workload.go).
	workload        *frag.Workload
	workloadStarted bool
	// plan: the last solve's decisions on claims not created yet (plan.go).
	plan *plan
	// batchLimit: the batch bound learnt from the solver's cost, timeLimit
	// from the passes' time (batch.go).
	batchLimit, timeLimit int
	// leftOut: the claims the last pass left out for the batch bound
	// (the window does not wait for more while they fill a batch).
	leftOut int
	// lastSolve: the last pass's solve phase (its build included), which
	// the next batch's writes must leave room for (batch.go).
	lastSolve time.Duration
	// passDeadline: past it the running pass starts no more writes
	// (writer.go; zero: none). Its start plus passTarget.
	passDeadline time.Time
	// oneShot: the reconciler runs one pass (reconcile --once), which
	// writes everything it solved: there is no next pass to defer to.
	oneShot bool
	// selectors keeps the CEL selectors' answers per device between
	// passes (model.Memo): a pass evaluates them only on the
	// devices of new or changed slices. The problem built is the same.
	selectors *model.Memo
	// reserver holds the node reservation across passes (Options.Reserve).
	reserver *reserve.Reserver
	// holder holds claims back for forecast demand (Options.Hold,
	// holding.go); holdRecheck is when the held ones are due again.
	holder      *hold.Holder
	holdRecheck time.Time
	// heldDevices are the devices the last pass's held claims need, held
	// since heldSince (drasat_held_device_seconds_total).
	heldDevices int
	heldSince   time.Time

	// fence admits writes while this replica leads (fence.go); nil
	// without leader election.
	fence *fence
	// checkMemo keeps between re-checks what depends on the devices,
	// nodes and classes alone (check.Memo): most of a check's time on a
	// large cluster, the same while they do not change.
	checkMemo     *check.Memo
	checkMemoOnce sync.Once
}

// PassResult summarises one pass.
type PassResult struct {
	Pending     int  // claims drasat is responsible for that were pending
	Solved      int  // claims in the batch
	Allocated   int  // allocations written (or, dry run, that would be)
	Unallocated int  // claims of the batch left unallocated
	Ungated     int  // pods whose gate was removed
	Placed      int  // gated pods without claims whose node drasat chose (Options.PlacePods)
	Withdrawn   int  // allocations withdrawn after a failed verification
	Optimal     bool // the batch's solve was proven optimal
	Parked      int  // pending claims left out: unplaceable, nothing changed since
	Projected   int  // stand-ins solved for claims gated pods do not have yet
	Planned     int  // claims written from the last solve's plan, without a solve
	Held        int  // claims and stand-ins held back for forecast demand (Options.Hold)
	Deferred    int  // allocations approved but left to the next pass: the pass reached its target (writer.go)
	toWrite     int  // allocations the pass meant to write
	// Requeue asks for another pass soon: claims beyond MaxBatch, or claims
	// whose write hit a conflict or whose re-check failed.
	Requeue bool
}

// Pass runs one reconcile pass over the current cache.
func (r *Reconciler) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	if ctx.Err() != nil {
		return res, nil
	}
	passStart := time.Now()
	r.passDeadline = time.Time{}
	if t := r.passTarget(); t > 0 && !r.oneShot {
		r.passDeadline = passStart.Add(t)
	}
	if r.reported == nil {
		r.reported = map[string]string{}
	}
	r.Metrics.Passes.Inc()
	r.ungated = map[string]bool{}
	snap, err := r.Cache.Snapshot()
	if err != nil {
		return res, err
	}
	r.startWorkload(snap)
	// Weights from the pods' priorities (weight.go), for the claims and
	// for the stand-ins below.
	prio := podPriorities(snap)
	snap.Claims = slices.Clone(snap.Claims)
	weighClaims(snap.Claims, prio)
	pending := ours(snap, r.Opts.Namespace)
	res.Pending = len(pending)
	r.Metrics.PendingClaims.Set(float64(len(pending)))
	if r.fair == nil {
		r.fair = newFairness()
	}
	r.fair.observe(snap)
	batch, leftOut := r.fair.selectBatch(pending, claimOwners(snap), r.writeBatch())
	res.Parked = len(pending) - len(batch) - leftOut
	res.Requeue = leftOut > 0
	r.leftOut = leftOut
	r.Metrics.ParkedClaims.Set(float64(res.Parked))
	// The claims gated pods will get but do not have yet (projection.go),
	// within what the batch bound leaves.
	dem := projectDemandAt(snap, r.Opts.Namespace, time.Now().Add(-r.Opts.StaleAfter))
	weighClaims(dem.projected, prio)
	r.reportStale(ctx, dem.stale)
	projected := dem.projected
	if m := r.maxBatch(); m > 0 {
		projected = projected[:min(len(projected), max(m-len(batch), 0))]
	}
	r.holdForget(dem, pending)
	written := map[string]*resourceapi.ResourceClaim{}
	var err2 error
	if r.plan.covers(demandKeys(dem, batch, projected), r.fair.inventory, r.fair.releaseEpoch) {
		// Nothing relevant changed since the last solve: its plan decides.
		err2 = r.writePlanned(ctx, snap, dem, batch, written, &res)
	} else if len(batch)+len(projected) > 0 {
		r.plan = nil
		err2 = r.solveAndWrite(ctx, snap, batch, projected, dem, written, &res)
	}
	if err2 != nil || res.Allocated < res.toWrite {
		// A claim the plan counts as written was not (a conflict, a failed
		// re-check): the next pass solves again.
		r.plan = nil
	}
	if err2 != nil {
		return res, err2
	}
	if r.Opts.DryRun {
		return res, nil
	}
	ungating := time.Now()
	if len(written) > 0 {
		r.settle(ctx, written)
	}
	err = r.ungate(ctx, written, &res)
	r.Metrics.PhaseSeconds.WithLabelValues("ungate").Observe(time.Since(ungating).Seconds())
	if err != nil {
		return res, err
	}
	// Gated pods without claims, on the cluster the pass's claims leave.
	if err := r.placeClaimless(ctx, written, &res); errors.Is(err, ErrFenced) {
		return res, err
	} else if err != nil {
		// The claims' steps below must not wait for these pods; the
		// next pass (an event, or the resync) tries them again.
		r.Log.Warn("pods without claims not placed", zap.Error(err))
	}
	r.releaseUnused(ctx, snap, &res)
	r.handOver(ctx, snap, &res)
	r.adaptBatchToTime(res.Solved+res.Projected, time.Since(passStart))
	return res, nil
}

// solveAndWrite solves the batch with every allocated claim fixed and writes
// the allocations.
func (r *Reconciler) solveAndWrite(ctx context.Context, snap *Snapshot, batch, projected []*resourceapi.ResourceClaim, dem *demand,
	written map[string]*resourceapi.ResourceClaim, res *PassResult) error {
	log := r.Log
	// A bad weight annotation would fail the whole build: leave such claims
	// out with a reason instead.
	var solve []*resourceapi.ResourceClaim
	for _, c := range batch {
		if w, ok := c.Annotations[model.WeightAnnotation]; ok {
			if n, err := strconv.ParseInt(w, 10, 64); err != nil || n < 0 || n > model.MaxWeight {
				r.unallocatable(ctx, c, fmt.Sprintf("annotation %s: %q is not an integer in [0, %d]", model.WeightAnnotation, w, model.MaxWeight))
				res.Unallocated++
				continue
			}
		}
		solve = append(solve, c)
	}
	res.Solved, res.Projected = len(solve), len(projected)
	r.Metrics.ProjectedClaims.Set(float64(len(projected)))
	solve = append(solve, projected...)
	if len(solve) == 0 {
		return nil
	}
	objs := objects(snap, solve)
	// The frag look-ahead's workload shapes are built with the batch, on
	// the same devices, instead of in a build of their own (frag.For).
	var shapes *frag.Workload
	if r.Opts.Policy == alloc.Frag {
		shapes = frag.WorkloadFor(objs, r.workload)
	}
	start := time.Now()
	// The engine logs its slow paths (the build, each stage) through the
	// context's logger: the controller's, at --log-level debug.
	ctx = klog.NewContext(ctx, zapr.NewLogger(r.Log.Named("engine")))
	r.holdObjects(objs, solve, dem, start)
	// Building (CEL selectors above all) shares the pass's time budget:
	// past it, the claims whose selectors were not evaluated are
	// unallocatable with that reason and the rest of the batch is solved.
	bctx, cancel := ctx, context.CancelFunc(func() {})
	if r.Opts.Timeout > 0 {
		bctx, cancel = context.WithTimeout(ctx, r.Opts.Timeout)
	}
	if r.selectors == nil {
		r.selectors = model.NewMemo()
	}
	// The memo goes with p.Options to the builds over the same objects
	// (frag's shapes, reserve); not to withoutBadPools' builds of one
	// pool alone, which would keep only that pool's devices.
	built := objs
	if shapes != nil {
		withShapes := *objs
		withShapes.Claims = append(slices.Clip(objs.Claims), shapes.ShapeClaims()...)
		built = &withShapes
	}
	// The shapes' candidates are every device they match, whatever runs
	// (frag.BindBuilt reads from them which GPUs a shape is held to).
	p, err := model.Build(bctx, built, model.Options{Compat: r.Opts.Compat, Memo: r.selectors, EveryMatch: frag.IsShape})
	outOfTime := bctx.Err() != nil
	cancel()
	if err != nil && shapes != nil && !outOfTime {
		// Not the batch's fault, maybe: build it alone (frag.For then
		// builds the shapes on their own, failing alone if they fail).
		shapes = nil
		p, err = model.Build(ctx, objs, model.Options{Compat: r.Opts.Compat, Memo: r.selectors})
	}
	var shapeClaims []*model.Claim
	if err == nil && shapes != nil {
		p, shapeClaims = p.Split(func(c *model.Claim) bool { return frag.IsShape(c.Obj) })
	} else {
		shapes = nil // built without them: frag.For builds them
	}
	if err != nil {
		if outOfTime {
			return fmt.Errorf("build problem: %w", err) // out of time, not a broken pool
		}
		// One broken pool must not block the cluster: leave out the pools
		// that fail on their own, and solve the rest.
		good, skipped := r.withoutBadPools(ctx, objs)
		if skipped == 0 {
			return fmt.Errorf("build problem: %w", err)
		}
		if p, err = model.Build(ctx, good, model.Options{Compat: r.Opts.Compat, Memo: r.selectors}); err != nil {
			return fmt.Errorf("build problem: %w", err)
		}
		objs = good
	}
	r.leaveToScheduler(ctx, p, res)
	for _, is := range p.Issues {
		log.Warn("pool not used", zap.String("pool", is.Driver+"/"+is.Pool), zap.String("reason", is.Reason))
	}
	// Hold claims back for forecast demand (holding.go): p keeps the
	// claims to admit now, the held ones after them.
	p, objs, held, err := r.holdBack(ctx, p, objs, dem, start)
	if err != nil {
		return err
	}
	if held != nil {
		res.Held = len(held.Held)
	}
	// The solver gets what building left of the pass's budget (selectors
	// not evaluated within it are errors of their claims only).
	opts := alloc.Options{Objective: r.Opts.Objective, Policy: r.Opts.Policy, Timeout: alloc.TimeLeft(r.Opts.Timeout, start)}
	if opts.Policy == alloc.Frag {
		// The look-ahead only re-places what binpack admits: without its
		// measure the pass still allocates. Its shapes' selectors are
		// evaluated within the pass's budget too.
		if shapes != nil {
			// Kept (when the build was not cut short) for the placement
			// of pods without claims below, which binds its own measure
			// on the cluster these claims leave: the shapes are built
			// once a pass. Without that placement nothing would use
			// them, and keeping them keeps this build's devices.
			var cluster *input.Objects
			if r.Opts.PlacePods && !r.Opts.DryRun && !outOfTime {
				cluster = objs
			}
			opts.Lookahead = shapes.BindBuilt(cluster, p, shapeClaims)
		} else {
			fctx, cancel := ctx, context.CancelFunc(func() {})
			if r.Opts.Timeout > 0 {
				fctx, cancel = context.WithDeadline(ctx, start.Add(r.Opts.Timeout))
			}
			opts.Lookahead, err = frag.For(fctx, objs, p, r.workload)
			cancel()
		}
		if err != nil {
			log.Warn("fragmentation measure unavailable, placing as binpack", zap.Error(err))
			opts.Lookahead = nil
		}
	}
	if r.Opts.Reserve {
		if r.reserver == nil {
			r.reserver = reserve.New()
		}
		rsv, err := r.reserver.Apply(ctx, objs, p, start)
		if m, ok := opts.Lookahead.(*frag.Measure); ok {
			m.Cover = true // the controller's claims wait
		}
		if err != nil {
			log.Warn("node reservation unavailable", zap.Error(err))
		} else if rsv.Claim != "" {
			log.Info("node reserved", zap.String("node", rsv.Node), zap.String("claim", rsv.Claim), zap.Int("runningClaims", rsv.Drain))
		}
	}
	out, err := alloc.Run(ctx, p, opts)
	if err != nil {
		return fmt.Errorf("solve: %w", err)
	}
	if held != nil {
		held.Drop(out) // held claims are neither admitted nor rejected
	}
	// Why claims fit nowhere, within what is left of the batch's budget.
	explain.FillReasons(ctx, p, out.Unplaceable, out.Rejected, start.Add(r.Opts.Timeout))
	claims, err := alloc.Allocated(p, out)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	// Real claims before stand-ins of the same shape; then what the solve
	// decided for the stand-ins is the plan for the claims to come.
	preferReal(p, claims, out.Rejected)
	r.plan = newPlan(r.fair, dem, solve, claims, out)
	if held != nil {
		r.plan.recheck = held.Recheck
		r.plan.held = map[string]bool{}
		for i, c := range p.Claims {
			if held.IsHeld(i) {
				r.plan.held[dem.key(c.Obj)] = true
			}
		}
	}
	if opts.Policy == alloc.Frag {
		if r.workload == nil {
			r.workload = frag.NewWorkload()
		}
		var cpu map[string]corev1.ResourceList
		if r.Opts.PlacePods {
			cpu = claimPodCPU(snap)
		}
		for _, c := range claims {
			if c.Status.Allocation != nil && !isProjected(c) {
				// Placing pods without claims, the shapes carry their
				// pods' CPU (FGD's shapes): else the measure cannot see
				// a node's CPU strand its GPUs.
				r.workload.ObserveTask(c, cpu[claimKey(c)])
			}
		}
	}
	for _, w := range r.fair.solved(realOnly(solve), realOnly(cannotFit(p, out))) {
		r.Metrics.PassesToFirstTry.Observe(float64(w))
	}
	elapsed := time.Since(start)
	r.Metrics.BatchSize.Observe(float64(len(solve)))
	r.Metrics.SolveSeconds.Observe(elapsed.Seconds())
	r.Metrics.PhaseSeconds.WithLabelValues("solve").Observe(elapsed.Seconds())
	res.Optimal = out.Stats.Optimal
	if out.Stats.Optimal {
		r.Metrics.Optimal.Set(1)
	} else {
		r.Metrics.Optimal.Set(0)
	}
	r.Metrics.Gap.Set(out.Stats.Gap())
	r.adaptBatch(len(solve), out.Stats.Optimal, out.Stats.Gap(), elapsed)
	r.lastSolve = elapsed
	log.Info("batch solved", zap.Int("claims", len(solve)), zap.Int("projected", len(projected)), zap.Int("admitted", out.Stats.Admitted),
		zap.Bool("optimal", out.Stats.Optimal), zap.Int64("bound", out.Stats.Bound), zap.Duration("took", elapsed))

	// Rejected claims: Event and annotation (stand-ins are not objects).
	for i, why := range out.Rejected {
		if c := p.Claims[i].Obj; !isProjected(c) {
			r.unallocatable(ctx, c, why.Error())
			res.Unallocated++
		}
	}
	r.Metrics.UnallocatedClaims.Set(float64(res.Unallocated))

	var todo []*resourceapi.ResourceClaim
	for _, c := range claims {
		if c.Status.Allocation != nil && !isProjected(c) {
			todo = append(todo, c)
		}
	}
	if r.Opts.DryRun {
		for _, c := range todo {
			if r.DryRunOut != nil {
				b, err := yaml.Marshal(c)
				if err != nil {
					return err
				}
				fmt.Fprintf(r.DryRunOut, "---\n%s", b)
			}
			log.Info("dry run: would allocate", zap.String("claim", claimKey(c)), zap.String("devices", devices(c)))
			res.Allocated++
		}
		return nil
	}

	if r.AfterSolve != nil {
		r.AfterSolve(todo)
		// Let the cache see what the hook did, as it would have by the
		// time a slow solve ends.
		time.Sleep(200 * time.Millisecond)
	}
	// Re-check, then write in parallel, ungating pods as they complete.
	return r.writeAll(ctx, snap, todo, written, res)
}

// writePlanned writes, without a solve, the claims whose stand-ins the
// plan admitted (plan.go); claims whose stand-ins it did not admit get the
// solve's reason and stay pending until something relevant changes.
func (r *Reconciler) writePlanned(ctx context.Context, snap *Snapshot, dem *demand, batch []*resourceapi.ResourceClaim,
	written map[string]*resourceapi.ResourceClaim, res *PassResult) error {
	var todo, decided []*resourceapi.ResourceClaim
	for _, c := range batch {
		k := dem.key(c)
		if a := r.plan.alloc[k]; a != nil {
			u := c.DeepCopy()
			u.Status.Allocation = a.DeepCopy()
			todo = append(todo, u)
			decided = append(decided, c)
			delete(r.plan.alloc, k)
		} else if why, ok := r.plan.why[k]; ok {
			r.unallocatable(ctx, c, why)
			res.Unallocated++
			decided = append(decided, c)
			delete(r.plan.why, k)
		} else if r.plan.held[k] {
			// Held for forecast demand (holding.go): decided, pending
			// until the plan's recheck.
			decided = append(decided, c)
			res.Held++
		}
	}
	if len(decided) > 0 {
		for _, w := range r.fair.solved(decided, nil) {
			r.Metrics.PassesToFirstTry.Observe(float64(w))
		}
	}
	if len(todo) == 0 {
		return nil
	}
	r.Metrics.PlannedClaims.Add(float64(len(todo)))
	res.Planned = len(todo)
	if r.Opts.DryRun {
		res.Allocated += len(todo)
		return nil
	}
	return r.writeAll(ctx, snap, todo, written, res)
}

// realOnly drops stand-ins.
func realOnly(cs []*resourceapi.ResourceClaim) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for _, c := range cs {
		if !isProjected(c) {
			out = append(out, c)
		}
	}
	return out
}

// demandKeys are the demand keys of a pass's claims and stand-ins.
func demandKeys(dem *demand, batch, projected []*resourceapi.ResourceClaim) []string {
	keys := make([]string, 0, len(batch)+len(projected))
	for _, c := range batch {
		keys = append(keys, dem.key(c))
	}
	for _, c := range projected {
		keys = append(keys, dem.key(c))
	}
	return keys
}

// withoutBadPools returns objs without the ResourceSlices of pools that
// fail to build on their own (each skipped with an Event and the metric
// drasat_skipped_objects_total), and how many pools it left out.
func (r *Reconciler) withoutBadPools(ctx context.Context, objs *input.Objects) (*input.Objects, int) {
	byPool := map[string][]*resourceapi.ResourceSlice{}
	var order []string
	for _, s := range objs.Slices {
		k := s.Spec.Driver + "/" + s.Spec.Pool.Name
		if byPool[k] == nil {
			order = append(order, k)
		}
		byPool[k] = append(byPool[k], s)
	}
	good := *objs
	good.Slices = nil
	skipped := 0
	for _, k := range order {
		alone := &input.Objects{Slices: byPool[k], Classes: objs.Classes, Nodes: objs.Nodes}
		if _, err := model.Build(ctx, alone, model.Options{Compat: r.Opts.Compat}); err != nil {
			skipped++
			for _, s := range byPool[k] {
				r.skip(s, "ResourceSlice", fmt.Sprintf("pool %s left out of allocation: %v", k, err))
			}
			continue
		}
		good.Slices = append(good.Slices, byPool[k]...)
	}
	return &good, skipped
}

// reportStale tells each gated pod given up on (projection.go) why, once
// per reason: a Warning Event and a log line. Its claims are allocated
// once they exist; until then it no longer slows other pods' batches.
func (r *Reconciler) reportStale(ctx context.Context, stale []stalePod) {
	for _, sp := range stale {
		why := fmt.Sprintf("still missing %s after %s; drasat allocates them once they exist, but no longer waits for them in its batches", sp.why, r.Opts.StaleAfter)
		key := "stale/" + string(sp.pod.UID)
		if r.reported[key] == why {
			continue
		}
		if r.Opts.DryRun {
			r.reported[key] = why
			continue
		}
		_, done, err := r.startWrite(ctx) // an Event is a write too: only the leader's
		if err != nil {
			continue
		}
		done()
		r.reported[key] = why
		r.Metrics.Skipped.WithLabelValues("Pod").Inc()
		r.Log.Warn("gated pod's claims missing", zap.String("pod", sp.pod.Namespace+"/"+sp.pod.Name), zap.String("reason", why))
		if r.Recorder != nil {
			r.Recorder.Event(sp.pod, corev1.EventTypeWarning, ReasonStale, why)
		}
	}
}

// skip reports an object drasat leaves out (a broken slice, a claim or pod
// whose write the API server refuses): a log line, the metric and a
// Warning Event, once per distinct reason.
func (r *Reconciler) skip(obj metav1.Object, kind, why string) {
	why = firstLine(why)
	key := "skip/" + string(obj.GetUID())
	if r.reported[key] == why {
		return
	}
	r.reported[key] = why
	r.Metrics.Skipped.WithLabelValues(kind).Inc()
	r.Log.Warn("skipped", zap.String("kind", kind), zap.String("name", obj.GetNamespace()+"/"+obj.GetName()), zap.String("reason", why))
	if r.Recorder != nil && !r.Opts.DryRun {
		if ro, ok := obj.(runtime.Object); ok {
			r.Recorder.Event(ro, corev1.EventTypeWarning, ReasonSkipped, why)
		}
	}
}

// refused reports API errors that concern only the object written
// (invalid, forbidden, refused by admission), not the connection.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// objects builds the engine input: all allocated claims (fixed) and the
// batch (pending).
func objects(snap *Snapshot, batch []*resourceapi.ResourceClaim) *input.Objects {
	objs := &input.Objects{Slices: snap.Slices, Classes: snap.Classes, Nodes: snap.Nodes, Pods: snap.Pods, TaintRules: snap.TaintRules}
	for _, c := range snap.Claims {
		if c.Status.Allocation != nil {
			objs.Claims = append(objs.Claims, c)
		}
	}
	objs.Claims = append(objs.Claims, batch...)
	return objs
}

// checkWith verifies one allocated claim against a fresh snapshot of the
// cache, overlaid with the claims this pass already wrote (the cache may not
// show them yet): its devices must be free, counters must not be exceeded,
// selectors and constraints must hold.
func (r *Reconciler) checkWith(written map[string]*resourceapi.ResourceClaim, c *resourceapi.ResourceClaim) error {
	return r.checkAll(written, []*resourceapi.ResourceClaim{c})
}

// checkAll is checkWith for several claims allocated together: it fails
// if any of them fails, or if they do not fit together.
func (r *Reconciler) checkAll(written map[string]*resourceapi.ResourceClaim, cs []*resourceapi.ResourceClaim) error {
	snap, err := r.Cache.Snapshot()
	if err != nil {
		return err
	}
	objs := &input.Objects{Slices: snap.Slices, Classes: snap.Classes, Nodes: snap.Nodes, Pods: snap.Pods, TaintRules: snap.TaintRules}
	checking := make(map[string]bool, len(cs))
	for _, c := range cs {
		checking[claimKey(c)] = true
	}
	found := 0
	for _, cl := range snap.Claims {
		k := claimKey(cl)
		if w, ok := written[k]; ok && newer(w, cl) {
			cl = w
		}
		if checking[k] {
			found++
			// The claim itself as it was before allocation.
			cl = cl.DeepCopy()
			cl.Status.Allocation = nil
		}
		objs.Claims = append(objs.Claims, cl)
	}
	if found < len(checking) {
		for _, c := range cs {
			if !slices.ContainsFunc(snap.Claims, func(cl *resourceapi.ResourceClaim) bool { return claimKey(cl) == claimKey(c) }) {
				return fmt.Errorf("claim %s no longer exists", claimKey(c))
			}
		}
	}
	r.checkMemoOnce.Do(func() { r.checkMemo = &check.Memo{} })
	return check.Check(objs, cs, check.Options{Compat: r.Opts.Compat, Memo: r.checkMemo})
}

// newer reports whether a (written by this pass) is at least as recent as b
// (from the cache). Resource versions are compared as the opaque strings
// they are unless both parse as integers (etcd's).
func newer(a, b *resourceapi.ResourceClaim) bool {
	if a.UID != b.UID {
		return false
	}
	x, err1 := strconv.ParseUint(a.ResourceVersion, 10, 64)
	y, err2 := strconv.ParseUint(b.ResourceVersion, 10, 64)
	if err1 != nil || err2 != nil {
		return a.ResourceVersion != b.ResourceVersion
	}
	return x >= y
}

// write adds the finalizer (and clears drasat's unallocatable annotation),
// then sets status.allocation; both updates carry the resourceVersion read,
// so a claim changed meanwhile is never overwritten.
func (r *Reconciler) write(ctx context.Context, cur *resourceapi.ResourceClaim, a *resourceapi.AllocationResult) (*resourceapi.ResourceClaim, error) {
	// Each request is admitted by the fence on its own (fence.go): the
	// second is not started once leadership is no longer assured; the
	// claim then keeps its finalizer and annotation without an
	// allocation, as after a conflict, and is solved again.
	claims := r.Client.ResourceV1().ResourceClaims(cur.Namespace)
	c := cur.DeepCopy()
	if !slices.Contains(c.Finalizers, Finalizer) || c.Annotations[UnallocatableAnnotation] != "" || c.Annotations[AllocatedByAnnotation] != r.Opts.Identity {
		if !slices.Contains(c.Finalizers, Finalizer) {
			c.Finalizers = append(c.Finalizers, Finalizer)
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		delete(c.Annotations, UnallocatableAnnotation)
		c.Annotations[AllocatedByAnnotation] = r.Opts.Identity
		wctx, done, err := r.startWrite(ctx)
		if err != nil {
			return nil, err
		}
		r.Metrics.Writes.WithLabelValues("claim").Inc()
		c, err = claims.Update(wctx, c, metav1.UpdateOptions{FieldManager: Component})
		done()
		if err != nil {
			return nil, err
		}
		c = c.DeepCopy()
	}
	c.Status.Allocation = a.DeepCopy()
	if c.Status.Allocation.AllocationTimestamp == nil {
		// The scheduler stamps its allocations. With DRADeviceBindingConditions
		// and DRAResourceClaimDeviceStatus on (beta in 1.37), its PreBind
		// stamps an unstamped allocation when reserving the claim for a pod,
		// and the API server rejects that as a change of the immutable
		// allocation: the pod would never bind. So drasat stamps it too.
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		c.Status.Allocation.AllocationTimestamp = &now
	}
	wctx, done, err := r.startWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	r.Metrics.Writes.WithLabelValues("claim-status").Inc()
	return claims.UpdateStatus(wctx, c, metav1.UpdateOptions{FieldManager: Component})
}

// unallocatable records why a claim could not be allocated: an Event and the
// drasat.dev/unallocatable annotation, once per distinct reason.
func (r *Reconciler) unallocatable(ctx context.Context, c *resourceapi.ResourceClaim, why string) {
	why = strings.TrimSpace(why)
	if r.reported[string(c.UID)] == why {
		return
	}
	if r.Opts.DryRun {
		r.reported[string(c.UID)] = why
		r.Metrics.ClaimsFailed.Inc()
		r.Log.Info("unallocatable", zap.String("claim", claimKey(c)), zap.String("reason", why))
		return
	}
	// Fenced like every write (fence.go): a replica that may have lost
	// the Lease reports nothing; the successor does.
	wctx, done, err := r.startWrite(ctx)
	if err != nil {
		return
	}
	defer done()
	r.reported[string(c.UID)] = why
	r.Metrics.ClaimsFailed.Inc()
	r.Log.Info("unallocatable", zap.String("claim", claimKey(c)), zap.String("reason", why))
	if r.Recorder != nil {
		r.Recorder.Event(c, corev1.EventTypeWarning, ReasonUnallocatable, why)
	}
	if c.Annotations[UnallocatableAnnotation] == why {
		return
	}
	u := c.DeepCopy()
	if u.Annotations == nil {
		u.Annotations = map[string]string{}
	}
	u.Annotations[UnallocatableAnnotation] = why
	if _, err := r.Client.ResourceV1().ResourceClaims(c.Namespace).Update(wctx, u, metav1.UpdateOptions{FieldManager: Component}); err != nil {
		// Not fatal: the next pass tries again.
		delete(r.reported, string(c.UID))
		r.Log.Info("could not annotate unallocatable claim", zap.String("claim", claimKey(c)), zap.Error(err))
	}
}

// settle waits (bounded) until the cache shows this pass's writes, so that
// the verification before ungating sees them and anything written
// concurrently by others.
func (r *Reconciler) settle(ctx context.Context, written map[string]*resourceapi.ResourceClaim) {
	deadline := time.Now().Add(r.Opts.SettleTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		behind := false
		for _, w := range written {
			cur, err := r.Cache.Claims.ResourceClaims(w.Namespace).Get(w.Name)
			if err == nil && cur.UID == w.UID && !newer(cur, w) {
				behind = true
				break
			}
		}
		if !behind {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ungate removes drasat's scheduling gate from every gated pod whose claims
// all exist and are allocated. Before that, each claim drasat allocated that
// no pod uses yet is verified once more against the cache; if another
// writer (the scheduler) allocated an overlapping device meanwhile, drasat
// withdraws its own allocation (the pod is still gated, so nothing uses it)
// and the claim is solved again.
func (r *Reconciler) ungate(ctx context.Context, written map[string]*resourceapi.ResourceClaim, res *PassResult) error {
	snap, err := r.Cache.Snapshot()
	if err != nil {
		return err
	}
	byKey := map[string]*resourceapi.ResourceClaim{}
	for _, c := range snap.Claims {
		byKey[claimKey(c)] = c
	}
	for k, w := range written {
		if c, ok := byKey[k]; !ok || newer(w, c) {
			byKey[k] = w
		}
	}
	// The claims to verify, verified together (verifyAll): one check of
	// the cluster for all of them, claim by claim only if that fails.
	gated := func(p *corev1.Pod) bool {
		if r.Opts.PlacePods && len(p.Spec.ResourceClaims) == 0 {
			return false // placeClaimless chooses its node
		}
		return hasGate(p) && p.DeletionTimestamp == nil && (r.Opts.Namespace == "" || p.Namespace == r.Opts.Namespace) && !r.ungated[p.Namespace+"/"+p.Name]
	}
	var toVerify []*resourceapi.ResourceClaim
	listed := map[string]bool{}
	for _, p := range snap.Pods {
		if !gated(p) {
			continue
		}
		names, complete := podClaimNames(p)
		if !complete {
			continue
		}
		for _, n := range names {
			c := byKey[p.Namespace+"/"+n]
			if c == nil || c.Status.Allocation == nil || c.DeletionTimestamp != nil {
				break
			}
			if key := claimKey(c); c.Annotations[AllocatedByAnnotation] != "" && len(c.Status.ReservedFor) == 0 && !listed[key] {
				listed[key] = true
				toVerify = append(toVerify, c)
			}
		}
	}
	failed := r.verifyAll(written, toVerify)
	verified := map[string]bool{}
	for _, p := range snap.Pods {
		if ctx.Err() != nil {
			return nil
		}
		if !gated(p) {
			continue
		}
		names, complete := podClaimNames(p)
		if !complete {
			continue
		}
		ready := true
		for _, n := range names {
			c := byKey[p.Namespace+"/"+n]
			if c == nil || c.Status.Allocation == nil || c.DeletionTimestamp != nil {
				ready = false
				break
			}
			key := claimKey(c)
			if ok, done := verified[key]; done {
				ready = ready && ok
				continue
			}
			ok := true
			if c.Annotations[AllocatedByAnnotation] != "" && len(c.Status.ReservedFor) == 0 {
				if err := failed[key]; err != nil {
					ok = false
					r.Log.Warn("allocation conflicts with one written by someone else; withdrawing it", zap.String("claim", key), zap.Error(err))
					r.Metrics.CheckRejections.Inc()
					if werr := r.withdraw(ctx, c, err); werr != nil {
						r.Log.Info("could not withdraw allocation", zap.String("claim", key), zap.Error(werr))
					} else {
						res.Withdrawn++
					}
					res.Requeue = true
				}
			}
			verified[key] = ok
			ready = ready && ok
		}
		if !ready {
			continue
		}
		err := r.removeGate(ctx, p)
		if err != nil && ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrFenced) {
			return err
		}
		if err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				res.Requeue = true
				continue
			}
			if refused(err) {
				r.skip(p, "Pod", fmt.Sprintf("removing the scheduling gate %s was refused: %v", SchedulingGate, err))
				continue
			}
			return fmt.Errorf("remove gate of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		res.Ungated++
		r.Metrics.GatesRemoved.Inc()
		r.Log.Info("scheduling gate removed", zap.String("pod", p.Namespace+"/"+p.Name), zap.Strings("claims", names))
		if r.Recorder != nil {
			r.Recorder.Eventf(p, corev1.EventTypeNormal, ReasonUngated, "all %d claims allocated; scheduling gate %s removed", len(names), SchedulingGate)
		}
	}
	return nil
}

// verify checks an allocated claim against every other allocation in the
// cache (overlaid with this pass's writes).
func (r *Reconciler) verify(written map[string]*resourceapi.ResourceClaim, c *resourceapi.ResourceClaim) error {
	return r.checkWith(written, c)
}

// withdraw clears an allocation drasat wrote (resourceVersion-guarded).
func (r *Reconciler) withdraw(ctx context.Context, c *resourceapi.ResourceClaim, why error) error {
	wctx, done, err := r.startWrite(ctx)
	if err != nil {
		return err
	}
	defer done()
	u := c.DeepCopy()
	u.Status.Allocation = nil
	r.withdrawn.note(c.UID)
	if _, err := r.Client.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(wctx, u, metav1.UpdateOptions{FieldManager: Component}); err != nil {
		return err
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(c, corev1.EventTypeWarning, ReasonWithdrawn, "allocation withdrawn before use: %v", firstLine(why.Error()))
	}
	return nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// devices lists a claim's allocated devices for logs and Events.
func devices(c *resourceapi.ResourceClaim) string {
	if c.Status.Allocation == nil {
		return ""
	}
	var parts []string
	for _, r := range c.Status.Allocation.Devices.Results {
		parts = append(parts, r.Driver+"/"+r.Pool+"/"+r.Device)
	}
	return strings.Join(parts, ", ")
}

// DefaultWriteTimeout bounds each write (Options.WriteTimeout). Writes
// are not cancelled by shutdown or lost leadership (a claim is never left
// half-written by drasat's own cancellation); the fence (fence.go) starts
// one only when it ends before the Lease could expire.
const DefaultWriteTimeout = 4 * time.Second
