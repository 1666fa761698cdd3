//go:build e2eload

package e2e

// The scale test (make e2e-scale; build tag e2eload, outside make test):
// the controller on a large cluster of fake nodes. SCALE_NODES Nodes (no
// kubelet; default 200) with 8 A100-40GB each, published as `drasat bench
// -s mig` publishes them (the NVIDIA DRA driver's MIG slices: one slice per
// GPU with every MIG placement as a device drawing from the GPU's
// counters), a quarter of the GPUs already holding 1-2 MIG devices
// (allocated claims), then a stream of SCALE_PODS gated pods (default
// 1,000) at SCALE_RATE pods a second (default 10), each with one claim
// from its own ResourceClaimTemplate (the instance's pending claims, in
// order). drasat runs as its real binary, started once the pool exists.
//
// A pod counts as served when it is bound (spec.nodeName set) with its
// claim allocated and reserved for it: there is no kubelet, so bound pods
// stay Pending and never release their devices. The test ends when every
// pod is bound or no pod was bound for SCALE_QUIET (default 90s) after the
// last one was created.
//
// It reports: pods bound and bind latency p50/p99 (pod creation to
// PodScheduled); the controller's passes that did work (solved or ungated)
// with their time p50/p99/max, read from its "pass done" log lines, and
// every pass from drasat_pass_seconds; its peak resident memory (VmHWM of
// the process, sampled VmRSS as a check) and Go heap at the end; and the
// API requests it sent (drasat_api_requests_total) per claim it allocated,
// the writes apart. It fails when the final state is infeasible (the
// independent checker), when a pending pod still fits once binding has
// settled, when a pass failed, or when the peak RSS exceeds SCALE_MAX_RSS_MB
// (default 2048). The pass-time target (p99 under 30 s) is reported, not
// asserted: on a shared machine times are noise.
//
// SCALE_FLAGS adds drasat flags (space-separated); SCALE_OUT appends the
// run's row of the table in docs/performance.md to a file; SCALE_LOG
// copies the controller's log to a file (each pass's batch and time).

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/drasat/drasat/bench"
)

// scaleTableHeader heads the rows TestLoadScale makes.
const scaleTableHeader = `| nodes × GPUs, devices | pods, rate | bound | bind p50 / p99 | passes with work: p50 / p99 / max (n) | every pass (n, mean) | drasat peak RSS, heap at end | API requests per claim (writes) | CPU s |
|---|---|---|---|---|---|---|---|---|`

func TestLoadScale(t *testing.T) {
	nodes := envInt(t, "SCALE_NODES", 200)
	npods := envInt(t, "SCALE_PODS", 1000)
	rate, err := strconv.ParseFloat(envOr("SCALE_RATE", "10"), 64)
	must(t, err)
	if rate <= 0 {
		t.Fatal("SCALE_RATE must be positive")
	}
	quiet, err := time.ParseDuration(envOr("SCALE_QUIET", "90s"))
	must(t, err)
	maxRSS := envInt(t, "SCALE_MAX_RSS_MB", 2048)
	insts, err := bench.Generate("mig", bench.Size{Nodes: nodes, GPUs: 8, Claims: npods}, 1, bench.GenerateOptions{})
	must(t, err)
	objs := insts[0].Objs
	devices := 0
	for _, s := range objs.Slices {
		devices += len(s.Spec.Devices)
	}

	c := newCluster(t)
	// The pool goes in with a client of its own, faster than the suite's
	// admin client: thousands of objects.
	cfg := *c.adminCfg
	cfg.QPS, cfg.Burst = 1000, 2000
	fast := kubernetes.NewForConfigOrDie(&cfg)
	setup := time.Now()
	const ns = "scale"
	c.namespace(ns)
	parallel(t, len(objs.Classes), func(i int) error {
		dc := objs.Classes[i].DeepCopy()
		dc.ResourceVersion = ""
		_, err := fast.ResourceV1().DeviceClasses().Create(context.Background(), dc, metav1.CreateOptions{})
		return err
	})
	c.createNodes(objs.Nodes)
	parallel(t, len(objs.Slices), func(i int) error {
		s := objs.Slices[i].DeepCopy()
		s.ResourceVersion = ""
		_, err := fast.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{})
		return err
	})
	// Devices in use: allocated standalone claims. The pending claims
	// become templates, one per pod.
	var pending []*resourceapi.ResourceClaim
	var inUse []*resourceapi.ResourceClaim
	for _, cl := range objs.Claims {
		if cl.Status.Allocation == nil {
			pending = append(pending, cl)
		} else {
			inUse = append(inUse, cl)
		}
	}
	parallel(t, len(inUse), func(i int) error {
		cl := inUse[i]
		u, err := fast.ResourceV1().ResourceClaims(ns).Create(context.Background(),
			&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: cl.Name, Namespace: ns}, Spec: cl.Spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		u.Status.Allocation = cl.Status.Allocation.DeepCopy()
		_, err = fast.ResourceV1().ResourceClaims(ns).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
		return err
	})
	parallel(t, len(pending), func(i int) error {
		_, err := fast.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: pending[i].Name, Namespace: ns},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: pending[i].Spec}}, metav1.CreateOptions{})
		return err
	})
	t.Logf("pool: %d nodes, %d slices, %d devices, %d claims in use, %d templates, created in %s",
		len(objs.Nodes), len(objs.Slices), devices, len(inUse), len(pending), time.Since(setup).Round(time.Second))

	started := time.Now()
	d := c.startDrasat("drasat-scale", strings.Fields(os.Getenv("SCALE_FLAGS"))...)
	addr := ""
	c.eventually("drasat ready", 10*time.Minute, func() (bool, error) {
		if d.exited() {
			return false, fmt.Errorf("drasat exited: %s", d.tail(20))
		}
		if addr == "" {
			if !strings.Contains(d.tail(1000), "serving metrics and health") {
				return false, nil
			}
			addr = metricsAddr(t, d)
		}
		return strings.HasPrefix(httpGetQuiet("http://"+addr+"/readyz"), "ok"), nil
	})
	t.Logf("drasat ready (informers synced) %s after it started", time.Since(started).Round(time.Second))

	// Resident memory: VmHWM at the end is the peak; VmRSS sampled every
	// second checks it.
	var sampledRSS atomic.Int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		for {
			if kb := procStatusKB(d.cmd.Process.Pid, "VmRSS"); kb > sampledRSS.Load() {
				sampledRSS.Store(kb)
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(time.Second):
			}
		}
	}()

	start := time.Now()
	created := make(chan struct{})
	go func() {
		defer close(created)
		for i, cl := range pending {
			if w := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); w > 0 {
				time.Sleep(w)
			}
			if _, err := fast.CoreV1().Pods(ns).Create(context.Background(), pod(ns, cl.Name, true, fromTemplate("gpu", cl.Name)), metav1.CreateOptions{}); err != nil {
				t.Errorf("create pod %s: %v", cl.Name, err)
				return
			}
		}
	}()
	last, lastChange := -1, time.Now()
	for {
		bound := 0
		for _, p := range c.pods(ns) {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		if bound != last {
			last, lastChange = bound, time.Now()
			t.Logf("%d of %d pods bound after %.0fs", bound, len(pending), time.Since(start).Seconds())
		}
		finished := false
		select {
		case <-created:
			finished = bound == len(pending) || time.Since(lastChange) >= quiet
		default:
			lastChange = time.Now()
		}
		if finished || d.exited() {
			break
		}
		time.Sleep(5 * time.Second)
	}
	if d.exited() {
		t.Fatalf("drasat exited: %s", d.tail(30))
	}
	m := httpGet(t, "http://"+addr+"/metrics")
	close(stopSampling)
	sampling.Wait()
	hwm := procStatusKB(d.cmd.Process.Pid, "VmHWM")
	// Stopped, drasat writes the profiles SCALE_FLAGS may ask for
	// (--cpuprofile, --memprofile).
	d.stop()

	// Served pods and their bind latency.
	pods := c.pods(ns)
	claims := map[string]*resourceapi.ResourceClaim{}
	for _, cl := range c.claims(ns) {
		claims[cl.Name] = &cl
	}
	var lat []time.Duration
	bound, served := 0, 0
	for _, p := range pods {
		if p.Spec.NodeName == "" {
			continue
		}
		bound++
		if len(p.Status.ResourceClaimStatuses) == 1 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil {
			if cl := claims[*p.Status.ResourceClaimStatuses[0].ResourceClaimName]; cl != nil && cl.Status.Allocation != nil && reservedFor(cl, &p) {
				served++
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
				lat = append(lat, cond.LastTransitionTime.Sub(p.CreationTimestamp.Time))
			}
		}
	}
	slices.Sort(lat)

	// The passes that did work, from the log; every pass from the metric.
	logText, err := os.ReadFile(d.log)
	must(t, err)
	if f := os.Getenv("SCALE_LOG"); f != "" {
		must(t, os.WriteFile(f, logText, 0o644))
	}
	var passes []time.Duration
	for _, x := range passDone.FindAllStringSubmatch(string(logText), -1) {
		s, err := strconv.ParseFloat(x[1], 64)
		must(t, err)
		passes = append(passes, time.Duration(s*float64(time.Second)))
	}
	slices.Sort(passes)
	allPasses, _ := strconv.ParseFloat(metricValue(m, "drasat_pass_seconds_count"), 64)
	passSum, _ := strconv.ParseFloat(metricValue(m, "drasat_pass_seconds_sum"), 64)
	allocated, _ := strconv.ParseFloat(metricValue(m, "drasat_claims_allocated_total"), 64)
	requests, writes := 0.0, 0.0
	for _, x := range apiRequestLine.FindAllStringSubmatch(m, -1) {
		v, err := strconv.ParseFloat(x[3], 64)
		must(t, err)
		requests += v
		if x[1] != "get" && x[1] != "watch" {
			writes += v
		}
	}
	t.Logf("drasat API requests:\n%s", grepMetrics(m, "drasat_api_requests_total"))
	t.Logf("drasat metrics:\n%s", grepMetrics(m, "drasat_"))
	heap := rounded(metricValue(m, "go_memstats_heap_inuse_bytes"), 0)
	if h, err := strconv.ParseFloat(heap, 64); err == nil {
		heap = fmt.Sprintf("%.0f MB", h/1e6)
	}

	p99 := quantile(passes, 99)
	target := "met"
	if p99 > 30*time.Second {
		target = "missed"
	}
	row := fmt.Sprintf("| %d × 8, %d | %d, %g/s | %d (served %d) | %s / %s | %s / %s / %s (%d) | %.0f, %.2fs | %.0f MB (sampled %.0f MB), %s | %.1f (%.1f) | %s |",
		nodes, devices, len(pending), rate, bound, served, secs(quantile(lat, 50)), secs(quantile(lat, 99)),
		secs(quantile(passes, 50)), secs(p99), secs(quantile(passes, 100)), len(passes),
		allPasses, passSum/max(allPasses, 1), float64(hwm)/1024, float64(sampledRSS.Load())/1024, heap,
		requests/max(allocated, 1), writes/max(allocated, 1), rounded(metricValue(m, "process_cpu_seconds_total"), 0))
	t.Logf("pass p99 under 30 s: %s; %d claims allocated, %.0f API requests (%.0f writes)", target, int(allocated), requests, writes)
	t.Logf("\n%s\n%s", scaleTableHeader, row)
	if f := os.Getenv("SCALE_OUT"); f != "" {
		_, statErr := os.Stat(f)
		fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		must(t, err)
		if os.IsNotExist(statErr) {
			fmt.Fprintln(fh, scaleTableHeader)
		}
		fmt.Fprintln(fh, row)
		fh.Close()
	}

	if errs := metricValue(m, "drasat_pass_errors_total"); errs != "0" {
		t.Errorf("drasat_pass_errors_total = %s", errs)
	}
	if hwm > int64(maxRSS)*1024 {
		t.Errorf("drasat's peak RSS %.0f MB exceeds %d MB", float64(hwm)/1024, maxRSS)
	}
	if served < bound {
		t.Errorf("%d pods bound but only %d with their claim allocated and reserved for them", bound, served)
	}
	if bound < len(pending) {
		// Pods left: none of them may fit the cluster as it is.
		if fits := c.idleFits(ns, insts[0].Compat); len(fits) > 0 {
			t.Errorf("%d of %d pods unbound, and %d of them fit once binding settled: %v", len(pending)-bound, len(pending), len(fits), fits[:min(len(fits), 10)])
		}
	}
	c.assertFeasible()
}

var (
	// passDone: the controller's log line for a pass that did work.
	passDone = regexp.MustCompile(`"msg":"pass done".*"took":([0-9.e+-]+)`)
	// apiRequestLine: one series of drasat_api_requests_total.
	apiRequestLine = regexp.MustCompile(`(?m)^drasat_api_requests_total\{resource="([^"]*)",verb="([^"]*)"\} (\S+)$`)
)

// quantile is the q-th percentile of sorted durations (q = 100: the max).
func quantile(d []time.Duration, q int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)*q/100, len(d)-1)]
}

func secs(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return fmt.Sprintf("%.0fs", d.Seconds())
}

// procStatusKB is a field of /proc/PID/status in kB (0 if unreadable).
func procStatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}

// parallel runs f for 0..n-1 on 16 workers; the first error fails the test.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	must(t, first)
}

func envInt(t *testing.T, k string, def int) int {
	v, err := strconv.Atoi(envOr(k, strconv.Itoa(def)))
	if err != nil || v <= 0 {
		t.Fatalf("%s must be a positive integer (got %q)", k, os.Getenv(k))
	}
	return v
}

// httpGetQuiet is the body at url, or "" on any error.
func httpGetQuiet(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return ""
	}
	b := make([]byte, 16)
	n, _ := resp.Body.Read(b)
	return string(b[:n])
}
