package baseline

import (
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
)

// failures remembers, per claim spec and node, that the allocator found no
// allocation there, so that later claims of the same spec skip the node
// without another Allocate call.
//
// This leaves the simulation's answer unchanged because within one run of
// Upstream the allocated state only grows (claims are added, none is
// released), and the allocator's search for one claim on one node is
// exhaustive: every allocation it could find later, with more devices,
// counters and capacity in use, it could have found before. A node that
// failed a spec fails it for the rest of the run. Timeouts prove nothing
// and are not remembered. What the search reads of a claim is its spec
// (requests, constraints); two claims with equal specs are one key.
//
// Without it a claim that fits nowhere costs one call on every node, and
// at 128 nodes × 8 GPUs the simulation did not finish in 25 minutes
// (docs/performance.md, "The upstream allocator at scale").
type failures struct {
	on   bool
	keys map[string]int // spec JSON → index into why
	why  []map[string]string
}

func newFailures(on bool) *failures {
	return &failures{on: on, keys: map[string]int{}}
}

// spec returns the key of c's spec.
func (f *failures) spec(c *resourceapi.ResourceClaim) (int, error) {
	if !f.on {
		return -1, nil
	}
	b, err := json.Marshal(c.Spec)
	if err != nil {
		return 0, fmt.Errorf("claim %s/%s: spec: %w", c.Namespace, c.Name, err)
	}
	k, ok := f.keys[string(b)]
	if !ok {
		k = len(f.why)
		f.keys[string(b)] = k
		f.why = append(f.why, map[string]string{})
	}
	return k, nil
}

// at tells whether spec is known to fail on node, and why.
func (f *failures) at(spec int, node string) (string, bool) {
	if spec < 0 {
		return "", false
	}
	why, ok := f.why[spec][node]
	return why, ok
}

func (f *failures) add(spec int, node, why string) {
	if spec < 0 {
		return
	}
	f.why[spec][node] = why
}
