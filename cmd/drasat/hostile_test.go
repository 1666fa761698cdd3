package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
)

// hugeCounters is one pool whose counter is 2^63-25 (a prime, so no common unit shrinks it) and whose three devices
// each consume 4·10^18 of it: two fit (8·10^18), three do not (1.2·10^19
// does not even fit in an int64), plus three claims for one device each.
func hugeCounters() string {
	var sb strings.Builder
	sb.WriteString(`apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: big}
spec:
  selectors:
  - cel: {expression: "device.driver == 'big.example.com'"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: big.example.com
  nodeName: node-a
  pool: {name: p, generation: 1, resourceSliceCount: 1}
  sharedCounters:
  - name: set
    counters:
      units: {value: "9223372036854775783"}
  devices:
`)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&sb, `  - name: d%d
    consumesCounters:
    - counterSet: set
      counters:
        units: {value: "4000000000000000000"}
`, i)
	}
	for i := 0; i < 3; i++ {
		fmt.Fprintf(&sb, `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c%d, namespace: default}
spec:
  devices:
    requests:
    - name: r
      exactly: {deviceClassName: big}
`, i)
	}
	return sb.String()
}

// allocateChecked runs `drasat allocate -o json` on doc and checks the
// output with the independent checker; it returns how many claims were
// allocated.
func allocateChecked(t *testing.T, doc string, extra ...string) int {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, append([]string{"allocate", "-f", path, "-o", "json"}, extra...)...)
	if err != nil {
		t.Fatalf("allocate: %v\n%s", err, stderr)
	}
	var list struct {
		Items []*resourceapi.ResourceClaim `json:"items"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatal(err)
	}
	objs, _, err := input.Load([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := check.Check(objs, list.Items, check.Options{}); err != nil {
		t.Fatalf("allocation violates the rules:\n%v", err)
	}
	n := 0
	for _, c := range list.Items {
		if c.Status.Allocation != nil {
			n++
		}
	}
	return n
}

// Counter sums past 2^63 must not wrap around: two of the three claims fit.
func TestCountersNear2To63(t *testing.T) {
	for _, objective := range []string{"max-claims", "ordered"} {
		t.Run(objective, func(t *testing.T) {
			if got := allocateChecked(t, hugeCounters(), "--objective", objective); got != 2 {
				t.Fatalf("allocated %d claims, want 2 (2·4e18 fits in 2^63-25, 3·4e18 does not)", got)
			}
		})
	}
}
