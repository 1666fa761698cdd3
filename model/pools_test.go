package model

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// genSlice is a ResourceSlice of pool p of the GPU driver at a generation,
// published for node ("" with allNodes), with devices consuming counter
// set "gpu" when counters is set (then the slice carries the set, too).
func genSlice(name, node string, gen, count int, counters string, devices ...string) string {
	where := "nodeName: " + node
	if node == "" {
		where = "allNodes: true"
	}
	out := fmt.Sprintf(`---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %s}
spec:
  driver: gpu.example.com
  %s
  pool: {name: p, generation: %d, resourceSliceCount: %d}
`, name, where, gen, count)
	if counters != "" {
		out += "  sharedCounters: [{name: gpu, counters: {mem: {value: \"" + counters + "\"}}}]\n"
	}
	if len(devices) > 0 {
		out += "  devices:\n"
	}
	for _, d := range devices {
		out += "  - {name: " + d
		if counters != "" {
			out += ", consumesCounters: [{counterSet: gpu, counters: {mem: {value: \"1\"}}}]"
		}
		out += "}\n"
	}
	return out
}

const genNodes = `---
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
---
apiVersion: v1
kind: Node
metadata: {name: node-c}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
`

// reachOf lists each device as name@nodes (nodes by name, * for all).
func reachOf(p *Problem) string {
	var out []string
	for _, d := range p.Devices {
		var ns []string
		if d.All {
			ns = []string{"*"}
		}
		for _, n := range d.Reach {
			ns = append(ns, p.Nodes[n].Name)
		}
		out = append(out, d.ID.Device+"@"+strings.Join(ns, ","))
	}
	return strings.Join(out, " ")
}

// Each node uses the generation of a pool that upstream's GatherPools gives
// it: the highest among the slices published for it, when complete; an
// incomplete one is ignored where a newer generation exists, and blocks
// allocationMode All where none does.
func TestPoolGenerationPerNode(t *testing.T) {
	tests := []struct {
		name     string
		slices   string
		reach    string // devices and the nodes they serve
		issues   string // pool issues, ";"-joined
		allFails bool   // an allocationMode All claim fails (some node sees an incomplete pool)
	}{
		{name: "one generation",
			slices: genSlice("p-a", "node-a", 1, 1, "", "g0", "g1"),
			reach:  "g0@node-a g1@node-a"},
		{name: "newer generation on the same node wins",
			slices: genSlice("p-a1", "node-a", 1, 1, "", "old") + genSlice("p-a2", "node-a", 2, 1, "", "new"),
			reach:  "new@node-a"},
		{name: "pool moving between nodes: each node keeps its complete generation",
			slices: genSlice("p-a", "node-a", 1, 1, "", "g0", "g1") + genSlice("p-b", "node-b", 2, 1, "", "g0"),
			reach:  "g0@node-a g1@node-a g0@node-b"},
		{name: "all-nodes generation 1, node-local generation 2 on node-b",
			slices: genSlice("p-all", "", 1, 1, "", "g0") + genSlice("p-b", "node-b", 2, 1, "", "g0"),
			reach:  "g0@node-a,node-c g0@node-b"},
		{name: "incomplete older generation is ignored where a newer one exists",
			slices: genSlice("p-a", "node-a", 1, 2, "", "old") + genSlice("p-b", "node-b", 2, 1, "", "new"),
			reach:  "new@node-b"},
		{name: "incomplete newest generation: older one still used elsewhere",
			slices:   genSlice("p-a", "node-a", 1, 1, "", "old") + genSlice("p-b", "node-b", 2, 2, "", "new"),
			reach:    "old@node-a",
			issues:   "pool gpu.example.com/p: on node node-b: incomplete: generation 2 has 1 of 2 slices",
			allFails: true},
		{name: "generation complete across nodes",
			slices: genSlice("p-a", "node-a", 3, 2, "", "a0") + genSlice("p-b", "node-b", 3, 2, "", "b0") + genSlice("p-old", "node-c", 1, 1, "", "c0"),
			reach:  "c0@node-c a0@node-a b0@node-b"},
		// Upstream checks device names only among the slices published
		// for the node (buildPool's validateDeviceNames): d0 in node-a's
		// and node-b's slices is valid on each, d0 twice among the
		// slices node-a sees is invalid on node-a only.
		{name: "one device name in slices of different nodes",
			slices: genSlice("p-a", "node-a", 1, 2, "", "d0") + genSlice("p-b", "node-b", 1, 2, "", "d0"),
			reach:  "d0@node-a d0@node-b"},
		{name: "one device name twice in the slices a node sees",
			slices:   genSlice("p-a", "node-a", 1, 3, "", "d0") + genSlice("p-b", "node-b", 1, 3, "", "d1") + genSlice("p-all", "", 1, 3, "", "d0"),
			reach:    "d0@ d0@node-b,node-c d1@node-b",
			issues:   `pool gpu.example.com/p: on node node-a: invalid: device "d0" defined twice (slice p-all)`,
			allFails: true},
		{name: "incomplete everywhere",
			slices:   genSlice("p-a", "node-a", 1, 2, "", "a0"),
			issues:   "pool gpu.example.com/p: incomplete: generation 1 has 1 of 2 slices",
			allFails: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			all := claimYAML("all", "gpu", "        allocationMode: All\n")
			p := buildYAML(t, genNodes+tc.slices+all)
			if got := reachOf(p); got != tc.reach {
				t.Errorf("devices %q, want %q", got, tc.reach)
			}
			var issues []string
			for _, is := range p.Issues {
				issues = append(issues, is.String())
			}
			if got := strings.Join(issues, ";"); got != tc.issues {
				t.Errorf("issues %q, want %q", got, tc.issues)
			}
			if c := p.Claims[0]; (c.Err != nil) != tc.allFails {
				t.Errorf("All claim error %v, want failing %v", c.Err, tc.allFails)
			}
		})
	}
}

// Copies of one device from different generations exclude each other, and
// the allocated state, keyed by device name as upstream's, counts in every
// generation: an existing allocation holds all copies and consumes each
// generation's counters once.
func TestPoolGenerationsLinked(t *testing.T) {
	existing := `---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: old, namespace: default}
spec: {devices: {requests: [{name: r, exactly: {deviceClassName: gpu}}]}}
status:
  allocation:
    devices:
      results: [{request: r, driver: gpu.example.com, pool: p, device: g0}]
`
	p := buildYAML(t, genNodes+genSlice("p-a", "node-a", 1, 1, "4", "g0", "g1")+genSlice("p-b", "node-b", 2, 1, "3", "g0", "g2")+existing)
	if got := reachOf(p); got != "g0@node-a g1@node-a g0@node-b g2@node-b" {
		t.Fatalf("devices %q", got)
	}
	g0a, g0b := p.Devices[0], p.Devices[2]
	if !slices.Equal(g0a.Incompatible, []int{2}) || !slices.Equal(g0b.Incompatible, []int{0}) {
		t.Errorf("copies of g0 not linked: %v %v", g0a.Incompatible, g0b.Incompatible)
	}
	if !g0a.InUse || !g0b.InUse {
		t.Errorf("existing allocation of g0 holds copies: %v %v, want both", g0a.InUse, g0b.InUse)
	}
	if len(p.CounterSets) != 2 {
		t.Fatalf("%d counter sets, want one per generation", len(p.CounterSets))
	}
	for i, cs := range p.CounterSets {
		if got, want := cs.Free[0], cs.Capacity[0]-1; got != want {
			t.Errorf("counter set of generation %d: %d free, want %d (g0 consumed once)", i+1, got, want)
		}
	}
	// Each copy consumes its own generation's counters. g1 (generation 1
	// only) and g2 (generation 2 only) are counter consumers of their
	// generations; g0 consumes in both, so a new g0 of one generation
	// excludes the other generation's new consumers (but not g0's copies
	// in use: both are held by the existing allocation).
	if len(g0a.Consumes) != 1 {
		t.Errorf("g0 of generation 1 consumes from %d sets, want its own", len(g0a.Consumes))
	}
	if g1, g2 := p.Devices[1], p.Devices[3]; !slices.Equal(g1.Incompatible, nil) || !slices.Equal(g2.Incompatible, nil) {
		t.Errorf("with g0 in use nothing else is excluded: g1 %v, g2 %v", g1.Incompatible, g2.Incompatible)
	}
	free := buildYAML(t, genNodes+genSlice("p-a", "node-a", 1, 1, "4", "g0", "g1")+genSlice("p-b", "node-b", 2, 1, "3", "g0", "g2"))
	if g0a, g2 := free.Devices[0], free.Devices[3]; !slices.Contains(g0a.Incompatible, 3) || !slices.Contains(g2.Incompatible, 0) {
		t.Errorf("g0 of generation 1 and g2 of generation 2 do not exclude each other: %v %v", g0a.Incompatible, g2.Incompatible)
	}
	if g1 := free.Devices[1]; slices.Contains(g1.Incompatible, 3) {
		t.Errorf("g1 (generation 1 only) excludes g2: %v", g1.Incompatible)
	}
}

// One device name in the slices of two nodes (valid on each, see
// TestPoolGenerationPerNode): the two entries exclude each other, as the
// allocated state knows the device by name. An allocated name consumes for
// every entry (upstream sums every device of the pool whose name is
// allocated), while the claim allocating it is checked with its own: so
// with two pending claims that could take such names, a new d0 excludes
// the entries of other such names (e0), never a device whose name is once
// in the pool (d1), nor itself; a claim alone is left as upstream sees it.
func TestPoolDuplicateNameAcrossNodes(t *testing.T) {
	slice := func(name, where, devices string) string {
		return "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: " + name + "}\nspec:\n  driver: gpu.example.com\n  " +
			where + "\n  pool: {name: p, generation: 1, resourceSliceCount: 3}\n" + devices
	}
	dev := func(name string) string {
		return "  - {name: " + name + ", consumesCounters: [{counterSet: gpu, counters: {mem: {value: \"1\"}}}]}\n"
	}
	in := genNodes + slice("p-a", "nodeName: node-a", "  devices:\n"+dev("d0")+dev("e0")) +
		slice("p-b", "nodeName: node-b", "  devices:\n"+dev("d0")+dev("d1")+dev("e0")) +
		slice("p-counters", "allNodes: true", "  sharedCounters: [{name: gpu, counters: {mem: {value: \"4\"}}}]\n") +
		claimYAML("c", "gpu", "")
	alone := buildYAML(t, in)
	for _, d := range alone.Devices {
		if len(d.OrderExclusive) > 0 {
			t.Errorf("one pending claim: %s of %s excludes %v", d.ID.Device, d.Slice.Name, d.OrderExclusive)
		}
	}
	p := buildYAML(t, in+claimYAML("c2", "gpu", ""))
	if got := reachOf(p); got != "d0@node-a e0@node-a d0@node-b d1@node-b e0@node-b" {
		t.Fatalf("devices %q", got)
	}
	if len(p.Issues) > 0 {
		t.Fatalf("issues %v, want none", p.Issues)
	}
	want := map[int][]int{0: {1, 2, 4}, 1: {0, 2, 4}, 2: {0, 1, 4}, 3: nil, 4: {0, 1, 2}}
	for d, w := range want {
		if got := p.Devices[d].Incompatible; !slices.Equal(got, w) {
			t.Errorf("%s of %s excludes %v, want %v", p.Devices[d].ID.Device, p.Devices[d].Slice.Name, got, w)
		}
	}
	if got := len(p.Claims[0].Requests[0].Alternatives[0].Candidates); got != 5 {
		t.Errorf("%d candidates, want 5", got)
	}
}
