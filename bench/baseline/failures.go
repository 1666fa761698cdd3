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
	off    bool                         // the test's comparison without the memo
	bySpec map[string]map[string]string // spec JSON → node → why
}

func newFailures(on bool) *failures {
	return &failures{off: !on, bySpec: map[string]map[string]string{}}
}

// forSpec returns the nodes known to fail c's spec, with why; nil when the
// memo is off. The caller adds the nodes that fail.
func (f *failures) forSpec(c *resourceapi.ResourceClaim) (map[string]string, error) {
	if f.off {
		return nil, nil
	}
	b, err := json.Marshal(c.Spec)
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: spec: %w", c.Namespace, c.Name, err)
	}
	nodes, ok := f.bySpec[string(b)]
	if !ok {
		nodes = map[string]string{}
		f.bySpec[string(b)] = nodes
	}
	return nodes, nil
}
