//go:build e2eload

package e2e

// The load test (make e2e-load; build tag e2eload, outside make test): the
// claims of `drasat bench -s mig` seed 1 as pods with ResourceClaimTemplates
// on the real components; once with the kube-scheduler alone (pods not
// gated), once with drasat's controller (pods gated). It reports pods bound,
// time to the last bind, bind latency p50/p90, drasat's passes, solves and
// CPU seconds, and checks the targets: drasat binds at least as many pods as
// the scheduler alone and at least 95 % of what drasat admits offline on the
// same claims, no pod that fits stays gated with its devices idle once
// arrivals have stopped (idleAfter, idleGrace; and none fits when binding
// has settled), and the final state is feasible. The time target (last bind
// within twice the scheduler alone's plus the configured window) is
// reported, not asserted: on a shared machine times are noise.
//
// LOAD_SIZE (default 8x8:300) picks the instance, e.g. 16x8:1000.
// LOAD_PATTERN picks how the pods arrive:
//   - burst (default): all at once;
//   - stream: one after the other at LOAD_RATE pods per second (default 5);
//   - waves: LOAD_WAVES waves (default 4) of equal size, LOAD_WAVE_GAP apart
//     (default 30s), each created at once;
//   - departures: a burst; once binding has settled, every LOAD_DEPART-th pod
//     (default 3, bound or not) is deleted, releasing its claim, and the
//     rest may take the freed devices. Offline is then drasat on the same
//     events (offlineSameEvents: the burst, then the rest with the kept
//     allocations fixed); the optimum on the claims of the pods that stay,
//     which knows the departures before placing the burst, is reported
//     next to it.
// LOAD_MAX_WINDOW, LOAD_MAX_BATCH, LOAD_BATCH_WINDOW and LOAD_HOLD set drasat's
// --max-window, --max-batch, --batch-window and --hold (default: the controller's
// defaults); LOAD_FLAGS adds drasat flags (space-separated, e.g.
// "--kube-api-qps=200 --write-workers=16"); LOAD_SKIP_SCHEDULER=1
// skips the scheduler-alone run; LOAD_OUT appends the run's rows of the
// table in docs/performance.md (loadTableHeader) to a file.
//
// Besides the result it reports where the time went: per bound pod, from
// its claim's creation to its allocation, to its gate's removal and to its
// bind (read from the objects' timestamps), and drasat's time per pass
// phase (drasat_pass_phase_seconds).

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/k8s"
	"github.com/drasat/drasat/model"
)

type loadResult struct {
	mode          string
	bound, pods   int
	lastBind      time.Duration
	p50, p90      time.Duration
	passes, parks string
	firstTry      string // claims first solved within 1 pass of being seen / all
	// lastClaim: when the resourceclaim controller created the last claim
	// (after the start): no pod can bind before its claim exists.
	lastClaim   time.Duration
	solves, cpu string // drasat's solves and process CPU seconds
	planned     string // claims written from a plan, without a solve
	// Where the time went (stages): the last allocation written and the
	// last gate removed, after the start; per bound pod, from its claim's
	// creation to its allocation, from the allocation to the gate's
	// removal (drasat only), from both to the bind.
	lastAlloc, lastUngate     time.Duration
	toAlloc, toUngate, toBind durations
	idle                      string // drasat_held_device_seconds_total
	phases                    string // drasat's pass time per phase, summed
	// stuck: pods that fitted, with nothing allocated, bound or released
	// for idleGrace, once arrivals had stopped for idleAfter (each with
	// when); fitAtEnd: pods that fit when binding had settled.
	stuck    []string
	fitAtEnd []string
}

// loadTableHeader heads the rows loadResult.row makes.
const loadTableHeader = `| size, arrivals | mode | bound / offline | last claim created | last bind | bind p50 / p90 | idle device-s | claim → allocated, → ungated, → bound (median/max) | drasat's time per phase (solve, recheck, write, ungate) |
|---|---|---|---|---|---|---|---|---|`

// row is the run's line of the load table.
func (r loadResult) row(size string, lp loadPattern, offline int, clairvoyant string) string {
	mode, idle, phases := "scheduler alone", "-", "-"
	if r.mode == "drasat" {
		mode, idle, phases = "drasat", r.idle, r.phases
	}
	return fmt.Sprintf("| %s, %s | %s | %d / %d (%.0f %%)%s | %.0fs | %.0fs | %.0fs / %.0fs | %s | %s, %s, %s | %s |",
		size, lp, mode, r.bound, offline, 100*float64(r.bound)/float64(max(offline, 1)), clairvoyant, r.lastClaim.Seconds(), r.lastBind.Seconds(),
		r.p50.Seconds(), r.p90.Seconds(), idle, r.toAlloc, r.toUngate, r.toBind, phases)
}

// durations are per-pod stage times; String gives their median and max.
type durations []time.Duration

func (d durations) String() string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("%.0f/%.0fs", s[len(s)/2].Seconds(), s[len(s)-1].Seconds())
}

// stages is where each bound pod's time went (loadResult), read from the
// objects (second resolution): the claim's creation, its allocation's
// timestamp (drasat's write or the scheduler's), drasat's Event on the
// pod when it removed the gate (ungated: pod name -> time), and the
// PodScheduled condition.
func (res *loadResult) stages(pods []corev1.Pod, claims []resourceapi.ResourceClaim, ungated map[string]time.Time, start time.Time) {
	byName := map[string]*resourceapi.ResourceClaim{}
	for i := range claims {
		byName[claims[i].Name] = &claims[i]
	}
	origin := start.Truncate(time.Second)
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			continue
		}
		cl := byName[*p.Status.ResourceClaimStatuses[0].ResourceClaimName]
		if cl == nil || cl.Status.Allocation == nil || cl.Status.Allocation.AllocationTimestamp == nil {
			continue
		}
		allocated := cl.Status.Allocation.AllocationTimestamp.Time
		res.lastAlloc = max(res.lastAlloc, allocated.Sub(origin))
		res.toAlloc = append(res.toAlloc, allocated.Sub(cl.CreationTimestamp.Time))
		ready := allocated
		if u, ok := ungated[p.Name]; ok {
			ready = later(allocated, u)
			res.lastUngate = max(res.lastUngate, u.Sub(origin))
			res.toUngate = append(res.toUngate, u.Sub(allocated))
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				res.toBind = append(res.toBind, cond.LastTransitionTime.Sub(ready))
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// loadPattern is how the pods arrive (LOAD_PATTERN and its parameters).
type loadPattern struct {
	name   string
	rate   float64       // stream: pods per second
	waves  int           // waves: how many
	gap    time.Duration // waves: time between two
	depart int           // departures: every depart-th pod is deleted
}

func patternFromEnv(t *testing.T) loadPattern {
	lp := loadPattern{name: envOr("LOAD_PATTERN", "burst")}
	var err error
	switch lp.name {
	case "burst":
	case "stream":
		lp.rate, err = strconv.ParseFloat(envOr("LOAD_RATE", "5"), 64)
		if err == nil && lp.rate <= 0 {
			err = fmt.Errorf("LOAD_RATE must be positive")
		}
	case "waves":
		lp.waves, err = strconv.Atoi(envOr("LOAD_WAVES", "4"))
		if err == nil {
			lp.gap, err = time.ParseDuration(envOr("LOAD_WAVE_GAP", "30s"))
		}
		if err == nil && lp.waves < 1 {
			err = fmt.Errorf("LOAD_WAVES must be at least 1")
		}
	case "departures":
		lp.depart, err = strconv.Atoi(envOr("LOAD_DEPART", "3"))
		if err == nil && lp.depart < 1 {
			err = fmt.Errorf("LOAD_DEPART must be at least 1")
		}
	default:
		err = fmt.Errorf("LOAD_PATTERN %q: want burst, stream, waves or departures", lp.name)
	}
	must(t, err)
	return lp
}

func (lp loadPattern) String() string {
	switch lp.name {
	case "stream":
		return fmt.Sprintf("stream %g pods/s", lp.rate)
	case "waves":
		return fmt.Sprintf("%d waves %s apart", lp.waves, lp.gap)
	case "departures":
		return fmt.Sprintf("burst, then every %d. pod deleted", lp.depart)
	}
	return "burst"
}

// createAt is when (after the start) the i-th of n pods is created.
func (lp loadPattern) createAt(i, n int) time.Duration {
	switch lp.name {
	case "stream":
		return time.Duration(float64(i) / lp.rate * float64(time.Second))
	case "waves":
		return time.Duration(i*lp.waves/n) * lp.gap
	}
	return 0
}

// departs reports whether the i-th pending claim's pod is deleted.
func (lp loadPattern) departs(i int) bool { return lp.depart > 0 && i%lp.depart == 0 }

func TestLoadMIG(t *testing.T) {
	sizeSpec := envOr("LOAD_SIZE", "8x8:300")
	lp := patternFromEnv(t)
	sizes, err := bench.ParseSizes(sizeSpec)
	must(t, err)
	insts, err := bench.Generate("mig", sizes[0], 1, bench.GenerateOptions{})
	must(t, err)
	objs := insts[0].Objs

	// Offline: drasat on the whole batch at once, as `drasat bench` runs
	// it; with departures, on the claims of the pods that stay.
	off := *objs
	off.Claims = nil
	pendingIdx := 0
	for _, cl := range objs.Claims {
		if cl.Status.Allocation == nil {
			pendingIdx++
			if lp.departs(pendingIdx - 1) {
				continue
			}
		}
		off.Claims = append(off.Claims, cl)
	}
	p, err := model.Build(context.Background(), &off, model.Options{Compat: insts[0].Compat})
	must(t, err)
	out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 10 * time.Second})
	must(t, err)
	offline := out.Stats.Admitted
	t.Logf("offline: drasat admits %d pending claims (optimal: %v); arrivals: %s", offline, out.Stats.Optimal, lp)
	// With departures, the optimum on the claims that stay knows which
	// pods will leave before any is placed; the live run (and the
	// scheduler) must place the burst first and cannot move a running
	// pod's allocation. The target is drasat offline on the same events
	// (offlineSameEvents); the optimum knowing the departures is reported
	// next to it.
	clairvoyant := ""
	if lp.depart > 0 {
		known := offline
		offline, err = offlineSameEvents(objs, lp, insts[0].Compat)
		must(t, err)
		clairvoyant = fmt.Sprintf("; %d knowing the departures", known)
		t.Logf("offline on the same events (the burst, then the departures, allocations kept): %d; knowing the departures ahead: %d", offline, known)
	}

	// Subtests, so each cluster stops before the next starts.
	var sched, live loadResult
	if os.Getenv("LOAD_SKIP_SCHEDULER") == "" {
		t.Run("scheduler-alone", func(t *testing.T) { sched = runLoad(t, objs, lp, insts[0].Compat, false) })
	}
	t.Run("drasat", func(t *testing.T) { live = runLoad(t, objs, lp, insts[0].Compat, true) })
	window := 30 * time.Second // the controller's default --max-window
	if w := os.Getenv("LOAD_MAX_WINDOW"); w != "" {
		window, err = time.ParseDuration(w)
		must(t, err)
	}
	// Holding adds at most --hold to a claim's latency: the configured
	// window is both.
	window += loadHold(t)
	timeTarget := "met"
	if live.lastBind > 2*sched.lastBind+window {
		timeTarget = "missed"
	}
	report := fmt.Sprintf("| %s, seed 1, %s, flags: max-window %s, max-batch %s, batch-window %s, hold %s, other %q | offline %d | scheduler alone: %d bound, last bind %.1fs, p50 %.1fs, p90 %.1fs, last claim created %.1fs | drasat: %d bound (%.0f %% of offline), last bind %.1fs (time target %s), last claim created %.1fs, p50 %.1fs, p90 %.1fs, passes %s, solves %s, planned %s, parked at end %s, first tried within 2 passes %s, CPU %ss |",
		sizeSpec, lp, envOr("LOAD_MAX_WINDOW", "default"), envOr("LOAD_MAX_BATCH", "default"), envOr("LOAD_BATCH_WINDOW", "default"), envOr("LOAD_HOLD", "default"), os.Getenv("LOAD_FLAGS"), offline,
		sched.bound, sched.lastBind.Seconds(), sched.p50.Seconds(), sched.p90.Seconds(), sched.lastClaim.Seconds(),
		live.bound, 100*float64(live.bound)/float64(max(offline, 1)), live.lastBind.Seconds(), timeTarget, live.lastClaim.Seconds(), live.p50.Seconds(), live.p90.Seconds(),
		live.passes, live.solves, live.planned, live.parks, live.firstTry, live.cpu)
	t.Log(report)
	// The table of docs/performance.md: one row per run and mode.
	rows := ""
	for _, r := range []loadResult{sched, live} {
		if r.mode == "" {
			continue // skipped
		}
		rows += r.row(sizeSpec, lp, offline, clairvoyant) + "\n"
	}
	t.Logf("\n%s\n%s", loadTableHeader, rows)
	if f := os.Getenv("LOAD_OUT"); f != "" {
		_, statErr := os.Stat(f)
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		must(t, err)
		if os.IsNotExist(statErr) {
			fmt.Fprintln(fh, loadTableHeader)
		}
		fmt.Fprint(fh, rows)
		fh.Close()
	}
	if live.bound < sched.bound {
		t.Errorf("drasat bound %d pods, fewer than the scheduler alone (%d)", live.bound, sched.bound)
	}
	if 100*live.bound < 95*offline {
		t.Errorf("drasat bound %d pods live, below 95%% of the %d it admits offline", live.bound, offline)
	}
	if len(live.stuck) > 0 {
		t.Errorf("drasat left %d pods gated that fitted, nothing allocated, bound or released for %s, after arrivals had stopped for %s: %s", len(live.stuck), idleGrace, idleAfter, strings.Join(live.stuck, ", "))
	}
	if len(live.fitAtEnd) > 0 {
		t.Errorf("when binding had settled, %d pending pods fitted: %s", len(live.fitAtEnd), strings.Join(live.fitAtEnd, ", "))
	}
}

// loadHold is LOAD_HOLD, drasat's --hold (0: off), or the controller's
// default when unset.
func loadHold(t *testing.T) time.Duration {
	h := os.Getenv("LOAD_HOLD")
	if h == "" {
		return k8s.DefaultHold
	}
	d, err := time.ParseDuration(h)
	must(t, err)
	return d
}

// runLoad creates the pods as the pattern says and waits until binding
// stops.
func runLoad(t *testing.T, objs *input.Objects, lp loadPattern, compat string, gated bool) loadResult {
	c := newCluster(t)
	c.createPool(objs)
	const ns = "load"
	c.namespace(ns)
	res := loadResult{mode: "scheduler", pods: len(objs.Claims)}
	var d *proc
	if gated {
		res.mode = "drasat"
		var flags []string
		if w := os.Getenv("LOAD_MAX_WINDOW"); w != "" {
			flags = append(flags, "--max-window="+w)
		}
		if b := os.Getenv("LOAD_MAX_BATCH"); b != "" {
			flags = append(flags, "--max-batch="+b)
		}
		if w := os.Getenv("LOAD_BATCH_WINDOW"); w != "" {
			flags = append(flags, "--batch-window="+w)
		}
		if h := os.Getenv("LOAD_HOLD"); h != "" {
			flags = append(flags, "--hold="+h)
		}
		flags = append(flags, strings.Fields(os.Getenv("LOAD_FLAGS"))...)
		d = c.startDrasat("drasat-load", flags...)
	}
	// The instance's allocated claims are devices already in use: created
	// as allocated standalone claims. The pending ones become pods.
	var pending []*resourceapi.ResourceClaim
	for _, cl := range objs.Claims {
		if cl.Status.Allocation == nil {
			pending = append(pending, cl)
			continue
		}
		u := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: ns}, Spec: cl.Spec}
		u, err := c.admin.ResourceV1().ResourceClaims(ns).Create(context.Background(), u, metav1.CreateOptions{})
		must(t, err)
		u.Status.Allocation = cl.Status.Allocation.DeepCopy()
		_, err = c.admin.ResourceV1().ResourceClaims(ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
		must(t, err)
	}
	res.pods = len(pending)
	for _, cl := range pending {
		c.createTemplate(ns, cl.Name, cl.Spec)
	}
	start := time.Now()
	created := make(chan struct{})
	go func() {
		defer close(created)
		for i, cl := range pending {
			if w := time.Until(start.Add(lp.createAt(i, len(pending)))); w > 0 {
				time.Sleep(w)
			}
			if _, err := c.admin.CoreV1().Pods(ns).Create(context.Background(), pod(ns, cl.Name, gated, fromTemplate("gpu", cl.Name)), metav1.CreateOptions{}); err != nil {
				t.Errorf("create pod %s: %v", cl.Name, err)
				return
			}
		}
	}()
	// Wait until every pod is bound or no pod bound for a while, after
	// the last pod was created (the first bind may take the whole
	// batching window).
	window := 30 * time.Second
	if w := os.Getenv("LOAD_MAX_WINDOW"); w != "" {
		var err error
		window, err = time.ParseDuration(w)
		must(t, err)
	}
	// drasat's pods are checked for idle fits (idleFits) every
	// idleCheckEvery, and at most half the time (the check's solve takes
	// CPU from the components), once arrivals (claims created for the
	// pods) have stopped for idleAfter: a pod that fits with nothing
	// changed (pods bound, alive, gated, with a claim) for idleGrace is
	// stuck.
	const idleCheckEvery = 5 * time.Second
	var checkTook time.Duration
	type fitState struct {
		key   [4]int
		since time.Time
	}
	fitting := map[string]fitState{}
	stuck := map[string]bool{}
	var lastCheck time.Time
	// Held claims are admitted at the latest --hold after they were first
	// seen: while drasat holds claims (drasat_held_claims), binding may
	// pause that long; settling waits for no bind for --hold plus 15 s.
	holdingSince := time.Time{}
	holding := func() bool {
		if d == nil {
			return false
		}
		if v, err := strconv.ParseFloat(metricValue(httpGet(t, "http://"+metricsAddr(t, d)+"/metrics"), "drasat_held_claims"), 64); err == nil && v == 0 {
			return false
		}
		if holdingSince.IsZero() {
			holdingSince = time.Now()
		}
		return time.Since(holdingSince) < loadHold(t)+15*time.Second
	}
	settle := func(phase string, quiet time.Duration) {
		last, lastChange := -1, time.Now()
		firstBy := time.Now().Add(quiet)
		if gated {
			firstBy = time.Now().Add(window + 60*time.Second)
		}
		withClaim, lastArrival := -1, time.Now()
		for time.Since(start) < 15*time.Minute {
			n, alive, gatedNow, claimed := 0, 0, 0, 0
			for _, p := range c.pods(ns) {
				if p.DeletionTimestamp != nil {
					continue
				}
				alive++
				if p.Spec.NodeName != "" {
					n++
				}
				if hasGate(&p) {
					gatedNow++
				}
				if len(p.Status.ResourceClaimStatuses) > 0 {
					claimed++
				}
			}
			if n != last {
				last, lastChange = n, time.Now()
				t.Logf("%s: %s%d bound after %.0fs", res.mode, phase, n, time.Since(start).Seconds())
			}
			if claimed != withClaim {
				withClaim, lastArrival = claimed, time.Now()
			}
			done := false
			select {
			case <-created:
				done = n == alive || (time.Since(lastChange) >= quiet && (last > 0 || time.Now().After(firstBy)) && !holding())
			default:
				lastChange, lastArrival = time.Now(), time.Now() // still creating pods
			}
			if gated && !done && time.Since(lastArrival) >= idleAfter && time.Since(lastCheck) >= max(idleCheckEvery, 2*checkTook) {
				lastCheck = time.Now()
				key := [4]int{n, alive, gatedNow, claimed}
				fits := c.idleFits(ns, compat)
				checkTook = time.Since(lastCheck)
				now := map[string]fitState{}
				for _, name := range fits {
					f, ok := fitting[name]
					if !ok || f.key != key {
						f = fitState{key: key, since: lastCheck}
					}
					now[name] = f
					if lastCheck.Sub(f.since) >= idleGrace && !stuck[name] {
						stuck[name] = true
						res.stuck = append(res.stuck, fmt.Sprintf("%s (fits since %.0fs)", name, f.since.Sub(start).Seconds()))
					}
				}
				fitting = now
				if len(fits) > 0 {
					t.Logf("%s: %s%d pending pods fit at %.0fs, arrivals stopped %.0fs before", res.mode, phase, len(fits), time.Since(start).Seconds(), time.Since(lastArrival).Seconds())
				}
			}
			if done {
				return
			}
			time.Sleep(time.Second)
		}
	}
	settle("", 45*time.Second)
	t.Logf("%s: %d pods created, the last at %.1fs (%d claims already allocated)", res.mode, len(pending), lp.createAt(len(pending)-1, len(pending)).Seconds(), len(objs.Claims)-len(pending))
	if lp.depart > 0 {
		gone := 0
		for i, cl := range pending {
			if lp.departs(i) {
				must(t, c.admin.CoreV1().Pods(ns).Delete(context.Background(), cl.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
				gone++
			}
		}
		t.Logf("%s: %d pods deleted after %.0fs", res.mode, gone, time.Since(start).Seconds())
		res.pods -= gone
		settle("after departures: ", 45*time.Second)
	}
	if gated {
		res.fitAtEnd = c.idleFits(ns, compat)
	}
	var lat []time.Duration
	for _, p := range c.pods(ns) {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
			continue
		}
		res.bound++
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				// Second resolution: the API stores conditions so.
				l := cond.LastTransitionTime.Sub(p.CreationTimestamp.Time)
				lat = append(lat, l)
				res.lastBind = max(res.lastBind, cond.LastTransitionTime.Sub(start.Truncate(time.Second)))
			}
		}
	}
	claims := c.claims(ns)
	for _, cl := range claims {
		if len(cl.OwnerReferences) > 0 { // created from a template for a pod
			res.lastClaim = max(res.lastClaim, cl.CreationTimestamp.Sub(start.Truncate(time.Second)))
		}
	}
	ungated := map[string]time.Time{}
	evs, err := c.admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	for _, ev := range evs.Items {
		if ev.Reason == k8s.ReasonUngated && ev.InvolvedObject.Kind == "Pod" {
			at := ev.FirstTimestamp.Time
			if !ev.EventTime.IsZero() {
				at = ev.EventTime.Time
			}
			ungated[ev.InvolvedObject.Name] = at
		}
	}
	res.stages(c.pods(ns), claims, ungated, start)
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p50, res.p90 = lat[len(lat)*50/100], lat[min(len(lat)*90/100, len(lat)-1)]
	}
	if d != nil {
		m := httpGet(t, "http://"+metricsAddr(t, d)+"/metrics")
		res.passes, res.parks = metricValue(m, "drasat_passes_total"), metricValue(m, "drasat_parked_claims")
		res.firstTry = metricValue(m, `drasat_passes_to_first_try_bucket{le="1"}`) + "/" + metricValue(m, "drasat_passes_to_first_try_count")
		res.solves, res.cpu = metricValue(m, "drasat_solve_seconds_count"), metricValue(m, "process_cpu_seconds_total")
		res.planned = metricValue(m, "drasat_planned_claims_total")
		res.idle = rounded(metricValue(m, "drasat_held_device_seconds_total"), 0)
		var ph []string
		for _, phase := range []string{"solve", "recheck", "write", "ungate"} {
			ph = append(ph, rounded(metricValue(m, `drasat_pass_phase_seconds_sum{phase="`+phase+`"}`), 1)+"s")
		}
		res.phases = strings.Join(ph, ", ")
		t.Logf("drasat metrics:\n%s", grepMetrics(m, "drasat_"))
	}
	t.Logf("%s: %d of %d pods bound, last bind %.1fs, p50 %.1fs, p90 %.1fs; last claim created at %.1fs", res.mode, res.bound, res.pods,
		res.lastBind.Seconds(), res.p50.Seconds(), res.p90.Seconds(), res.lastClaim.Seconds())
	t.Logf("%s: stages: last allocation %.0fs, last ungate %.0fs; per pod (median/max): claim created -> allocated %s, allocated -> ungated %s, -> bound %s; drasat's passes: %s",
		res.mode, res.lastAlloc.Seconds(), res.lastUngate.Seconds(), res.toAlloc, res.toUngate, res.toBind, res.phases)
	if gated {
		t.Logf("%s: pods stuck (fitting, nothing changing, %s after arrivals stopped): %d %v; fitting when settled: %d %v", res.mode, idleAfter, len(res.stuck), res.stuck, len(res.fitAtEnd), res.fitAtEnd)
	}
	c.assertFeasible()
	return res
}

// rounded is a metric's value with prec decimals ("?" stays).
func rounded(v string, prec int) string {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return v
	}
	return strconv.FormatFloat(f, 'f', prec, 64)
}

func metricValue(m, name string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	if x := re.FindStringSubmatch(m); x != nil {
		if f, err := strconv.ParseFloat(x[1], 64); err == nil {
			return strconv.FormatFloat(f, 'f', -1, 64)
		}
	}
	return "?"
}

func grepMetrics(m, prefix string) string {
	var out []string
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, prefix) && !strings.Contains(l, "_bucket") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// idleGrace is how long a pod that fits may stay gated, with nothing
// allocated, bound or released meanwhile, once arrivals have stopped for
// idleAfter: past it, the load test fails (its devices idle while it waits).
const (
	idleAfter = 10 * time.Second
	idleGrace = 10 * time.Second
)

// idleFits is the pods in ns, alive and not bound, whose pending claims the
// engine can still allocate on the cluster as it is, every allocation
// fixed (a solve of the pending claims of the live pods; any claim it
// admits fits now). The pods are named in order.
func (c *cluster) idleFits(ns, compat string) []string {
	c.t.Helper()
	objs := c.objects()
	alive := map[string]bool{} // pod name in ns -> waiting for its bind
	pods := objs.Pods[:0]
	for _, p := range objs.Pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		pods = append(pods, p)
		if p.Namespace == ns && p.Spec.NodeName == "" {
			alive[p.Name] = true
		}
	}
	objs.Pods = pods
	owner := map[string]string{} // claim name -> its pod
	claims := objs.Claims[:0]
	for _, cl := range objs.Claims {
		if cl.Status.Allocation == nil {
			if cl.Namespace != ns || cl.DeletionTimestamp != nil || len(cl.OwnerReferences) == 0 || !alive[cl.OwnerReferences[0].Name] {
				continue
			}
			owner[cl.Name] = cl.OwnerReferences[0].Name
		}
		claims = append(claims, cl)
	}
	objs.Claims = claims
	if len(owner) == 0 {
		return nil
	}
	p, err := model.Build(context.Background(), objs, model.Options{Compat: compat})
	must(c.t, err)
	out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 5 * time.Second})
	must(c.t, err)
	var fits []string
	for _, a := range out.Assignments {
		if pod, ok := owner[a.Claim.Obj.Name]; ok {
			fits = append(fits, pod)
		}
	}
	slices.Sort(fits)
	return fits
}

// offlineSameEvents is what drasat admits offline on the departures
// pattern's events without knowing them ahead: every pending claim solved
// at once, as the burst; the departing pods' claims then removed (their
// allocations released); the claims still pending solved again with every
// kept allocation fixed, as allocations of running pods are. The kept
// claims plus those the second solve admits.
func offlineSameEvents(objs *input.Objects, lp loadPattern, compat string) (int, error) {
	solve := func(objs *input.Objects) (*model.Problem, *alloc.Result, error) {
		p, err := model.Build(context.Background(), objs, model.Options{Compat: compat})
		if err != nil {
			return nil, nil, err
		}
		out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 10 * time.Second})
		return p, out, err
	}
	p, first, err := solve(objs)
	if err != nil {
		return 0, err
	}
	allocated := map[string]*resourceapi.AllocationResult{}
	for _, a := range first.Assignments {
		r, err := alloc.AllocationResult(p, a)
		if err != nil {
			return 0, err
		}
		allocated[a.Claim.Obj.Name] = r
	}
	after := *objs
	after.Claims = nil
	kept, pendingIdx := 0, 0
	for _, cl := range objs.Claims {
		if cl.Status.Allocation == nil {
			pendingIdx++
			if lp.departs(pendingIdx - 1) {
				continue
			}
			if r := allocated[cl.Name]; r != nil {
				cl = cl.DeepCopy()
				cl.Status.Allocation = r
				kept++
			}
		}
		after.Claims = append(after.Claims, cl)
	}
	_, second, err := solve(&after)
	if err != nil {
		return 0, err
	}
	return kept + second.Stats.Admitted, nil
}
