package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A controller started on a running cluster, given --workload-from, starts
// its look-ahead from the file's claims and labelled pods and from the
// claim the kube-scheduler allocated before it ran (read from the real
// API: the template's claim, its pod bound), then allocates as usual.
func TestWorkloadWarmStart(t *testing.T) {
	c := newCluster(t)
	c.createNodes([]*corev1.Node{nodeNamed("node-1")})
	c.createWholeGPUs("node-1", 2)
	ns := "warm"
	c.namespace(ns)
	c.createTemplate(ns, "gpu", deviceSpec("gpu"))

	// The scheduler's pod runs before drasat starts.
	c.createPod(pod(ns, "running", false, fromTemplate("gpu", "gpu")))
	c.eventually("the scheduler's pod bound", time.Minute, func() (bool, error) {
		return c.pod(ns, "running").Spec.NodeName == "node-1", nil
	})

	past := filepath.Join(c.dir, "past.yaml")
	must(t, os.WriteFile(past, []byte(`apiVersion: v1
kind: List
items:
- {apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: a, namespace: old},
   spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 1}}]}}}
- {apiVersion: resource.k8s.io/v1, kind: ResourceClaim, metadata: {name: b, namespace: old},
   spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}]}}}
- {apiVersion: v1, kind: Pod, metadata: {name: pa, namespace: old},
   spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "2"}}}], resourceClaims: [{name: g, resourceClaimName: a}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: etl, namespace: old, labels: {drasat.dev/place: "true"}},
   spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "8"}}}]}}
`), 0o600))
	d := c.startDrasat("drasat-a", "--workload-from="+past)
	c.createPod(pod(ns, "next", true, fromTemplate("gpu", "gpu")))
	c.eventually("drasat's pod bound", time.Minute, func() (bool, error) {
		return c.pod(ns, "next").Spec.NodeName == "node-1", nil
	})
	// The file's three tasks, then those and the scheduler's claim (with
	// its pod's CPU: --place-pods-without-claims is on).
	for msg, want := range map[string]float64{"look-ahead workload read": 3, "look-ahead workload to start from": 4} {
		if got := logField(t, d.log, msg, "tasks"); got != want {
			t.Errorf("log %q: tasks %v, want %v", msg, got, want)
		}
	}
	c.assertFeasible()
}

// logField is a number field of the first JSON log line with message msg.
func logField(t *testing.T, path, msg, field string) float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		v, _ := rec[field].(float64)
		return v
	}
	t.Fatalf("%s: no log line %q", path, msg)
	return 0
}
