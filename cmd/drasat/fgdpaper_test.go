package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/drasat/drasat/bench"
)

// drasat bench -s fgd-paper: a small run writes the table and the JSON;
// bad flags fail before anything runs, naming the flag.
func TestBenchFGDPaper(t *testing.T) {
	if _, err := bench.OpenBDir(""); err != nil {
		t.Skipf("trace not available: %v", err)
	}
	js := filepath.Join(t.TempDir(), "fgd.json")
	gogc, memLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	out, err := runBenchCmd(t, "-s", "fgd-paper", "--fgd-list", "multigpu20", "--fgd-nodes", "40", "--seeds", "2", "-p", "fgd", "-p", "random", "--no-progress", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	// The run's GOGC and memory limit are the process's: set back after.
	if g, m := debug.SetGCPercent(gogc), debug.SetMemoryLimit(memLimit); (os.Getenv("GOGC") == "" && g != 100) || (os.Getenv("GOMEMLIMIT") == "" && m != math.MaxInt64) {
		t.Errorf("after the run GOGC %d and memory limit %d, want them set back", g, m)
	}
	if !strings.Contains(out, "list multigpu20") || !strings.Contains(out, "fgd ") || !strings.Contains(out, "random ") {
		t.Errorf("table:\n%s", out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.FPReport
	if err := json.Unmarshal(b, &rep); err != nil || len(rep.Results) != 2 || len(rep.Seeds) != 2 || rep.Nodes != 40 {
		t.Errorf("json: %v, %d results, seeds %v, %d nodes", err, len(rep.Results), rep.Seeds, rep.Nodes)
	}
	for _, bad := range [][]string{
		{"--seeds", "0"},
		{"-s", "mig"},
		{"--fgd-drasat-cpu", "spread"},
		{"-p", "first-fit-decreasing"},
		{"--fgd-list", "nosuchlist"},
		{"--fgd-arrivals", "mt19937"},
		{"--fgd-drasat-workload", "future"},
		{"--fgd-workers", "0"},
	} {
		args := append([]string{"-s", "fgd-paper", "--fgd-nodes", "10", "--seeds", "1", "--no-progress"}, bad...)
		out, err := runBenchCmd(t, args...)
		if err == nil || out != "" {
			t.Errorf("%v: err %v, output %q", bad, err, out)
		}
	}
}
