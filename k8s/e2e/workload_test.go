package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A controller started on a running cluster, given --workload-from, starts
// its look-ahead from the file's claims and labelled pods and from the
// claim the kube-scheduler allocated before it ran (read from the real
// API: the template's claim, its pod bound), then allocates as usual.
func TestWorkloadWarmStart(t *testing.T) {
	c := newCluster(t)
	c.createNodes([]*corev1.Node{nodeNamed("node-1")})
	ctx := context.Background()
	_, err := c.admin.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.example.com"`}}}}}, metav1.CreateOptions{})
	must(t, err)
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu"}}
	s.Spec.Driver, s.Spec.NodeName = "gpu.example.com", ptr.To("node-1")
	s.Spec.Pool = resourceapi.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 1}
	s.Spec.Devices = []resourceapi.Device{{Name: "gpu-0"}, {Name: "gpu-1"}}
	_, err = c.admin.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
	must(t, err)
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
