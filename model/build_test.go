package model

import (
	"context"
	"strings"
	"testing"
)

// buildFixture: one node with two exclusive GPUs (gpu-0, gpu-1) and three
// shared ones (shared-0..2, allowMultipleAllocations), and a class per kind.
const buildFixture = `
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {kind: {string: exclusive}}
  - name: gpu-1
    attributes: {kind: {string: exclusive}}
  - name: shared-0
    allowMultipleAllocations: true
    attributes: {kind: {string: shared}}
  - name: shared-1
    allowMultipleAllocations: true
    attributes: {kind: {string: shared}}
  - name: shared-2
    allowMultipleAllocations: true
    attributes: {kind: {string: shared}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: shared.example.com}
spec:
  selectors:
  - cel: {expression: "device.attributes['gpu.example.com'].kind == 'shared'"}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: broken.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.example.com'"}
  - cel: {expression: "device.driver =="}
`

// claimYAML is a claim with one request; extra is appended to the request.
func claimYAML(name, class, extra string) string {
	return `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ` + name + `, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: ` + class + `
` + extra
}

// claimName is the metadata.name of a claimYAML document.
func claimName(doc string) string {
	rest := strings.SplitN(doc, "metadata: {name: ", 2)[1]
	return rest[:strings.Index(rest, ",")]
}

func buildYAML(t *testing.T, docs string) *Problem {
	t.Helper()
	objs, _, err := Load([]string{"-"}, strings.NewReader(docs))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	p, err := Build(context.Background(), objs, Options{})
	if err != nil {
		t.Fatalf("Build: %v (want per-claim errors only)", err)
	}
	return p
}

func claimErr(t *testing.T, p *Problem, key string) error {
	t.Helper()
	for _, c := range p.Claims {
		if c.Key == key {
			return c.Err
		}
	}
	t.Fatalf("claim %s not in problem", key)
	return nil
}

func TestBuildClaimErrors(t *testing.T) {
	sharedSel := "        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].kind == 'shared'\"}\n"
	tests := []struct {
		name  string
		claim string
		want  []string // substrings of the claim's Err; none: no error
	}{
		{name: "exclusive devices", claim: claimYAML("ok", "gpu.example.com", "")},
		{name: "shared devices besides exclusive ones", claim: claimYAML("mixed", "gpu.example.com", "        count: 2\n")},
		{name: "only shared devices (class)", claim: claimYAML("shared", "shared.example.com", ""),
			want: []string{"request gpu: the only matching devices (3, e.g. gpu.example.com/node-1/shared-0) allow multiple allocations, which drasat does not support yet"}},
		{name: "only shared devices (selector)", claim: claimYAML("shared-sel", "gpu.example.com", sharedSel),
			want: []string{"request gpu: the only matching devices (3, e.g. gpu.example.com/node-1/shared-0) allow multiple allocations"}},
		{name: "allocationMode All, only shared devices", claim: claimYAML("shared-one", "gpu.example.com",
			"        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].kind == 'shared' && device.driver == 'gpu.example.com'\"}\n        allocationMode: All\n"),
			want: []string{"the only matching devices (3, e.g."}},
		{name: "no device at all", claim: claimYAML("none", "gpu.example.com",
			"        selectors:\n        - cel: {expression: \"device.attributes['gpu.example.com'].kind == 'other'\"}\n")},
		{name: "capacity request", claim: claimYAML("capacity", "shared.example.com",
			"        capacity: {requests: {memory: 1Gi}}\n"),
			want: []string{"request gpu: field capacity: consumable capacity requests are not supported by drasat yet"}},
		{name: "missing class", claim: claimYAML("noclass", "nope.example.com", ""),
			want: []string{`request gpu: device class "nope.example.com" not found`}},
		{name: "claim selector does not compile", claim: claimYAML("badsel", "gpu.example.com",
			"        selectors:\n        - cel: {expression: \"device.driver == 'a'\"}\n        - cel: {expression: \"device.nosuchfield(\"}\n"),
			want: []string{"request gpu: field selectors[1].cel.expression: CEL expression \"device.nosuchfield(\""}},
		{name: "class selector does not compile", claim: claimYAML("badclass", "broken.example.com", ""),
			want: []string{"request gpu: device class broken.example.com: field spec.selectors[1].cel.expression: CEL expression \"device.driver ==\""}},
		{name: "firstAvailable with a shared-only subrequest", claim: `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: fa, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      firstAvailable:
      - {name: shared, deviceClassName: shared.example.com}
      - {name: exclusive, deviceClassName: gpu.example.com}
`, want: []string{"request gpu/shared: the only matching devices (3"}},
	}
	// All claims in one run: one claim's error must not affect the others,
	// and the run itself must not fail.
	docs := buildFixture
	for _, tt := range tests {
		docs += tt.claim
	}
	p := buildYAML(t, docs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "default/" + claimName(tt.claim)
			err := claimErr(t, p, key)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("claim %s: unexpected error %v", key, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("claim %s: no error, want %q", key, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("claim %s: error %q does not contain %q", key, err, w)
				}
			}
		})
	}
}

// The match cache is shared by claims with the same class and selectors: a
// cached "only shared devices" error must reach every such claim, and must not
// leak to claims whose selectors differ.
func TestBuildSharedOnlyCached(t *testing.T) {
	docs := buildFixture + claimYAML("a", "shared.example.com", "") + claimYAML("b", "gpu.example.com", "") +
		claimYAML("c", "shared.example.com", "")
	p := buildYAML(t, docs)
	for _, key := range []string{"default/a", "default/c"} {
		if err := claimErr(t, p, key); err == nil || !strings.Contains(err.Error(), "allow multiple allocations") {
			t.Errorf("claim %s: error %v, want the shared-devices error", key, err)
		}
	}
	if err := claimErr(t, p, "default/b"); err != nil {
		t.Errorf("claim default/b: unexpected error %v", err)
	}
	for _, c := range p.Claims {
		if c.Key != "default/b" {
			continue
		}
		if got := len(c.Requests[0].Alternatives[0].Candidates); got != 2 {
			t.Errorf("claim default/b: %d candidates, want the 2 exclusive GPUs", got)
		}
	}
}

// Shared devices that are also tainted are not skipped "only" because they
// are shared: the claim keeps the ordinary outcome (no candidates, no Err).
func TestBuildSharedTaintedNotBlamed(t *testing.T) {
	docs := strings.Replace(buildFixture, "  - name: shared-0\n", "  - name: shared-0\n    taints: [{key: broken, effect: NoSchedule}]\n", 1)
	docs = strings.Replace(docs, "  - name: shared-1\n", "  - name: shared-1\n    taints: [{key: broken, effect: NoSchedule}]\n", 1)
	docs = strings.Replace(docs, "  - name: shared-2\n", "  - name: shared-2\n    taints: [{key: broken, effect: NoExecute}]\n", 1)
	p := buildYAML(t, docs+claimYAML("a", "shared.example.com", ""))
	if err := claimErr(t, p, "default/a"); err != nil {
		t.Errorf("claim default/a: error %v, want none (tainted devices are not candidates anyway)", err)
	}
}
