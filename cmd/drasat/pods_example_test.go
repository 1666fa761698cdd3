package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// examples/pods-cpu: the pods' nodes, CPU and taints decide where their
// claims go, and the claims left out say why in the pods' terms.
func TestPodsCPUExample(t *testing.T) {
	stdout, stderr, err := runCLI(t, "allocate", "-f", filepath.Join(examplesDir, "pods-cpu"), "-o", "table")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rows := map[string]string{} // claim -> node column
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) >= 4 && strings.HasPrefix(f[0], "default/") {
			rows[f[0]] = f[3]
		}
	}
	for claim, node := range map[string]string{"default/serve-gpu": rows["default/serve-nic"], "default/repair-gpu": "node-4"} {
		if rows[claim] != node || node == "" {
			t.Errorf("%s on %q, want %q", claim, rows[claim], node)
		}
	}
	train := 0
	for _, c := range []string{"a", "b", "c"} {
		if n := rows["default/train-"+c+"-gpu"]; strings.HasPrefix(n, "node-") {
			train++
			if n != "node-1" {
				t.Errorf("train-%s on %s: only node-1 has 40 CPUs free and tolerated", c, n)
			}
		}
	}
	if train != 1 {
		t.Errorf("%d training pods placed, want 1 (one 40-CPU pod per node-1)", train)
	}
	// node-1 keeps 24 of its 64 CPUs beside a training pod, 16 when the
	// 8-CPU serve pod goes there too (serve fits node-1 or node-3 alike).
	node1Free := "24"
	if rows["default/serve-gpu"] == "node-1" {
		node1Free = "16"
	}
	for _, why := range []string{"node-2 cordoned", "taint gpu=maintenance:NoSchedule of node-4 not tolerated", "needs 40 cpu, node-3 has 24 free",
		"node-1 has " + node1Free + " free besides the pods admitted there", "allocated 4 of 6 pending claims (optimal)"} {
		if !strings.Contains(stderr, why) {
			t.Errorf("stderr lacks %q:\n%s", why, stderr)
		}
	}
}
