package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/drasat/drasat/bench/baseline"
	"github.com/drasat/drasat/k8s"
)

// Case 1: the MIG pool of examples/mig-a100 (a counter slice and a device
// slice per node) and one gated pod per example claim, each with a
// ResourceClaimTemplate. The real resourceclaim controller creates the
// claims, drasat allocates them all and removes the gates, and the real
// kube-scheduler binds each pod to the node its allocation names. The
// kube-scheduler's own allocator, first-fit in arrival order, would strand
// a claim.
func TestMIGGatedPods(t *testing.T) {
	c := newCluster(t)
	objs := example(t, "mig-a100")
	c.createPool(objs)

	// The kube-scheduler's allocator on the claims as the API server
	// defaults them (a dry-run create), in arrival order.
	served := *objs
	served.Claims = nil
	for _, cl := range objs.Claims {
		cl = cl.DeepCopy()
		cl.Namespace = "default"
		d, err := c.admin.ResourceV1().ResourceClaims("default").Create(context.Background(), cl, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		must(t, err)
		served.Claims = append(served.Claims, d)
	}
	ff, err := baseline.Upstream(context.Background(), &served, baseline.UpstreamFeaturesFor(&served))
	must(t, err)
	t.Logf("kube-scheduler allocator, arrival order: %d of %d claims", ff.Admitted(), len(objs.Claims))
	for _, r := range ff.Rejected {
		t.Logf("first-fit rejects %s: %s", r.Key, r.Reason)
	}
	if ff.Admitted() != len(objs.Claims)-1 {
		t.Fatalf("scenario does not separate: first-fit admits %d of %d", ff.Admitted(), len(objs.Claims))
	}

	d := c.startDrasat("drasat-a")
	const ns = "mig"
	c.namespace(ns)
	for _, cl := range objs.Claims {
		c.createTemplate(ns, cl.Name, cl.Spec)
		c.createPod(pod(ns, cl.Name, true, fromTemplate("gpu", cl.Name)))
	}

	c.eventually("every pod bound by the kube-scheduler", 2*time.Minute, func() (bool, error) {
		for _, p := range c.pods(ns) {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	for _, p := range c.pods(ns) {
		if len(p.Spec.SchedulingGates) != 0 {
			t.Errorf("pod %s still gated: %v", p.Name, p.Spec.SchedulingGates)
		}
		cl := c.podClaim(&p, "gpu")
		if cl == nil || cl.Status.Allocation == nil {
			t.Fatalf("pod %s: claim not allocated", p.Name)
		}
		if cl.Annotations[k8s.AllocatedByAnnotation] != "drasat-a" {
			t.Errorf("claim %s allocated by %q, want drasat-a", cl.Name, cl.Annotations[k8s.AllocatedByAnnotation])
		}
		if !c.nodeMatches(cl.Status.Allocation, p.Spec.NodeName) {
			t.Errorf("pod %s bound to %s, outside its claim's node selector", p.Name, p.Spec.NodeName)
		}
		if !reservedFor(cl, &p) {
			t.Errorf("claim %s not reserved for pod %s", cl.Name, p.Name)
		}
		t.Logf("pod %-12s node %-7s claim %s: %s", p.Name, p.Spec.NodeName, cl.Name, devicesOf(cl))
	}
	if n := len(c.claims(ns)); n != len(objs.Claims) {
		t.Errorf("%d claims, want %d", n, len(objs.Claims))
	}
	c.assertFeasible()

	// Health and metrics on --metrics-addr.
	addr := metricsAddr(t, d)
	for _, path := range []string{"/healthz", "/readyz"} {
		if body := httpGet(t, "http://"+addr+path); strings.TrimSpace(body) != "ok" {
			t.Errorf("%s: %q", path, body)
		}
	}
	m := httpGet(t, "http://"+addr+"/metrics")
	for _, want := range []string{"drasat_claims_allocated_total 10", "drasat_gates_removed_total 10", "drasat_leader 1", "drasat_last_solve_optimal 1", "drasat_solve_seconds_count"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// metricsAddr reads the address drasat logged for --metrics-addr=127.0.0.1:0.
func metricsAddr(t *testing.T, p *proc) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	must(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		var e struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &e) == nil && e.Msg == "serving metrics and health" {
			return e.Addr
		}
	}
	t.Fatal("drasat did not log its metrics address")
	return ""
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(b)
}

// Case 2: the multi-host TPU pool of examples/tpu-multihost. One shared
// claim for a 4x4 slice, used by four gated pods that must not share a
// node: the allocation's node selector names the slice's four hosts and the
// scheduler places the pods exactly there.
func TestTPUMultiHost(t *testing.T) {
	c := newCluster(t)
	objs := example(t, "tpu-multihost", "00-nodes.yaml", "10-classes.yaml", "20-slices.yaml", "30-claims.yaml")
	c.createPool(objs)
	c.startDrasat("drasat-a")
	const ns = "tpu"
	c.namespace(ns)
	for _, cl := range objs.Claims {
		if cl.Name == "tpu-device" {
			c.createClaim(ns, "tpu-device", cl.Spec, false)
		}
	}
	for _, name := range []string{"worker-0", "worker-1", "worker-2", "worker-3"} {
		p := pod(ns, name, true, byName("tpu", "tpu-device"))
		p.Labels["job"] = "tpu"
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"job": "tpu"}},
				TopologyKey:   "kubernetes.io/hostname",
			}},
		}}
		c.createPod(p)
	}
	c.eventually("all four workers bound", 3*time.Minute, func() (bool, error) {
		for _, p := range c.pods(ns) {
			if p.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	cl := c.claim(ns, "tpu-device")
	a := cl.Status.Allocation
	if a == nil || a.NodeSelector == nil || len(a.NodeSelector.NodeSelectorTerms) != 1 {
		t.Fatalf("allocation %+v: want one node selector term", a)
	}
	hosts := map[string]bool{}
	for _, e := range a.NodeSelector.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == "kubernetes.io/hostname" {
			for _, v := range e.Values {
				hosts[v] = true
			}
		}
	}
	if len(hosts) != 4 {
		t.Fatalf("node selector names %v, want four hosts", hosts)
	}
	used := map[string]bool{}
	for _, p := range c.pods(ns) {
		if !hosts[p.Spec.NodeName] {
			t.Errorf("pod %s on %s, not one of the slice's hosts %v", p.Name, p.Spec.NodeName, hosts)
		}
		used[p.Spec.NodeName] = true
		if !reservedFor(cl, &p) {
			t.Errorf("claim not reserved for %s", p.Name)
		}
	}
	if len(used) != 4 {
		t.Errorf("pods on %v, want the four hosts", used)
	}
	t.Logf("tpu-device: %s on %v", devicesOf(cl), hosts)
	c.assertFeasible()
}
