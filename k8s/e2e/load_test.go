//go:build e2eload

package e2e

// The load test (make e2e-load; build tag e2eload, outside make test): the
// claims of `drasat bench -s mig` seed 1 as pods with ResourceClaimTemplates,
// all created at once, on the real components; once with the kube-scheduler
// alone (pods not gated), once with drasat's controller (pods gated). It
// reports pods bound, time to the last bind, bind latency p50/p90 and
// drasat's passes, and checks the targets: drasat binds at least as many
// pods as the scheduler alone and at least 95 % of what drasat admits
// offline on the same claims, and the final state is feasible.
//
// LOAD_SIZE (default 8x8:300) picks the instance, e.g. 16x8:1000;
// LOAD_MAX_WINDOW and LOAD_MAX_BATCH set drasat's --max-window and
// --max-batch (30s, 500); LOAD_SKIP_SCHEDULER=1 skips the scheduler-alone
// run; LOAD_OUT appends the result line to a file.

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

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/model"
)

type loadResult struct {
	mode          string
	bound, pods   int
	lastBind      time.Duration
	p50, p90      time.Duration
	passes, parks string
	firstTry      string // claims first solved within 1 pass of being seen / all
}

func TestLoadMIG(t *testing.T) {
	sizeSpec := envOr("LOAD_SIZE", "8x8:300")
	sizes, err := bench.ParseSizes(sizeSpec)
	must(t, err)
	insts, err := bench.Generate("mig", sizes[0], 1, bench.GenerateOptions{})
	must(t, err)
	objs := insts[0].Objs

	// Offline: drasat on the whole batch at once, as `drasat bench` runs it.
	p, err := model.Build(context.Background(), objs, model.Options{Compat: insts[0].Compat})
	must(t, err)
	out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 10 * time.Second})
	must(t, err)
	offline := out.Stats.Admitted
	t.Logf("offline: drasat admits %d pending claims (optimal: %v)", offline, out.Stats.Optimal)

	// Subtests, so each cluster stops before the next starts.
	var sched, live loadResult
	if os.Getenv("LOAD_SKIP_SCHEDULER") == "" {
		t.Run("scheduler-alone", func(t *testing.T) { sched = runLoad(t, objs, false) })
	}
	t.Run("drasat", func(t *testing.T) { live = runLoad(t, objs, true) })
	report := fmt.Sprintf("| %s, seed 1 | offline %d | scheduler alone: %d bound, last bind %.1fs, p50 %.1fs, p90 %.1fs | drasat: %d bound, last bind %.1fs, p50 %.1fs, p90 %.1fs, passes %s, parked at end %s, first tried within 2 passes %s |",
		sizeSpec, offline, sched.bound, sched.lastBind.Seconds(), sched.p50.Seconds(), sched.p90.Seconds(),
		live.bound, live.lastBind.Seconds(), live.p50.Seconds(), live.p90.Seconds(), live.passes, live.parks, live.firstTry)
	t.Log(report)
	if f := os.Getenv("LOAD_OUT"); f != "" {
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		must(t, err)
		fmt.Fprintln(fh, report)
		fh.Close()
	}
	if live.bound < sched.bound {
		t.Errorf("drasat bound %d pods, fewer than the scheduler alone (%d)", live.bound, sched.bound)
	}
	if 100*live.bound < 95*offline {
		t.Errorf("drasat bound %d pods live, below 95%% of the %d it admits offline", live.bound, offline)
	}
}

// runLoad creates every pod at once and waits until binding stops.
func runLoad(t *testing.T, objs *model.Objects, gated bool) loadResult {
	c := newCluster(t)
	c.createPool(objs)
	const ns = "load"
	c.namespace(ns)
	res := loadResult{mode: "scheduler", pods: len(objs.Claims)}
	var d *proc
	if gated {
		res.mode = "drasat"
		d = c.startDrasat("drasat-load", "--max-window="+envOr("LOAD_MAX_WINDOW", "30s"), "--max-batch="+envOr("LOAD_MAX_BATCH", "500"))
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
	for _, cl := range pending {
		c.createPod(pod(ns, cl.Name, gated, fromTemplate("gpu", cl.Name)))
	}
	t.Logf("%s: %d pods created in %.1fs (%d claims already allocated)", res.mode, len(pending), time.Since(start).Seconds(), len(objs.Claims)-len(pending))
	// Wait until every pod is bound or no pod bound for a while (the
	// first bind may take the whole batching window).
	quiet := 45 * time.Second
	last, lastChange := -1, time.Now()
	firstBy := start.Add(quiet)
	if gated {
		w, err := time.ParseDuration(envOr("LOAD_MAX_WINDOW", "30s"))
		must(t, err)
		firstBy = start.Add(w + 60*time.Second)
	}
	for (time.Since(lastChange) < quiet || (last <= 0 && time.Now().Before(firstBy))) && time.Since(start) < 10*time.Minute {
		n := 0
		for _, p := range c.pods(ns) {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		if n != last {
			last, lastChange = n, time.Now()
			t.Logf("%s: %d bound after %.0fs", res.mode, n, time.Since(start).Seconds())
		}
		if n == len(pending) {
			break
		}
		time.Sleep(time.Second)
	}
	var lat []time.Duration
	for _, p := range c.pods(ns) {
		if p.Spec.NodeName == "" {
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
	slices.Sort(lat)
	if len(lat) > 0 {
		res.p50, res.p90 = lat[len(lat)*50/100], lat[min(len(lat)*90/100, len(lat)-1)]
	}
	if d != nil {
		m := httpGet(t, "http://"+metricsAddr(t, d)+"/metrics")
		res.passes, res.parks = metricValue(m, "drasat_passes_total"), metricValue(m, "drasat_parked_claims")
		res.firstTry = metricValue(m, `drasat_passes_to_first_try_bucket{le="1"}`) + "/" + metricValue(m, "drasat_passes_to_first_try_count")
		t.Logf("drasat metrics:\n%s", grepMetrics(m, "drasat_"))
	}
	t.Logf("%s: %d of %d pods bound, last bind %.1fs, p50 %.1fs, p90 %.1fs", res.mode, res.bound, res.pods,
		res.lastBind.Seconds(), res.p50.Seconds(), res.p90.Seconds())
	c.assertFeasible()
	return res
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
