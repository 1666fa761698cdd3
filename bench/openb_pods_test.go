package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTrace writes a trace folder of one node list and the default pod
// list.
func writeTrace(t *testing.T, nodes, pods string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"openb_node_list_gpu_node.csv": nodes, "openb_pod_list_default.csv": pods} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.TrimSpace(body)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// One node of 8 CPUs and two GPUs. A CPU-only task takes 4 CPUs first;
// then two one-GPU tasks of 3 CPUs each arrive together: the GPUs hold
// both, the node's CPU one. The replay with pods admits one, the GPU-only
// replay both, for every policy.
func TestOpenBReplayCarriesPods(t *testing.T) {
	dir := writeTrace(t, `
sn,cpu_milli,memory_mib,gpu,model
n0,8000,65536,2,A100`, `
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
cpu,4000,1024,0,0,,LS,Running,0,100000,0
gpu-a,3000,1024,1,1000,,LS,Running,120,100000,120
gpu-b,3000,1024,1,1000,,LS,Running,121,100000,121`)
	for _, policy := range []string{PolicyFirstFit, PolicyUpstream, PolicyFGD, PolicyDrasat} {
		for _, gpuOnly := range []bool{false, true} {
			cfg := OpenBConfig{Dir: dir, Load: 1, GPUOnly: gpuOnly}
			row, err := RunOpenB(context.Background(), cfg, Size{}, 1, policy, 5*time.Second)
			if err != nil {
				t.Fatalf("%s gpu-only %v: %v", policy, gpuOnly, err)
			}
			want, cpu := 1, 1
			if gpuOnly {
				want, cpu = 2, 0
			}
			if row.Claims != 2 || row.Admitted != want || row.Replay.CPUTasks != cpu || row.Replay.CPUTasksPlaced != cpu {
				t.Errorf("%s gpu-only %v: admitted %d of %d GPU tasks, CPU-only placed %d of %d; want %d of 2, %d of %d",
					policy, gpuOnly, row.Admitted, row.Claims, row.Replay.CPUTasksPlaced, row.Replay.CPUTasks, want, cpu, cpu)
			}
		}
	}
}

// oneNodeTwoGPUs is a node of 8 CPUs and two A100s; oneGPUTask6CPU a
// list of one GPU task of 6 CPUs: two of them do not fit the node's CPU.
const (
	oneNodeTwoGPUs = `
sn,cpu_milli,memory_mib,gpu,model
n0,8000,65536,2,A100`
	oneGPUTask6CPU = `
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
gpu,6000,1024,1,1000,,LS,Running,0,100000,0`
)

// The inflation protocol draws the CPU-only tasks too; a GPU task's pod
// takes its CPU: on a node of 8 CPUs, one task of 6 CPUs fits where the
// GPUs would hold two.
func TestInflationCarriesPods(t *testing.T) {
	dir := writeTrace(t, oneNodeTwoGPUs, oneGPUTask6CPU)
	for _, policy := range []string{PolicyFirstFit, PolicyBestFit, PolicyDrasat} {
		for _, gpuOnly := range []bool{false, true} {
			row, err := RunInflation(context.Background(), OpenBConfig{Dir: dir, GPUOnly: gpuOnly}, Size{}, 1, policy, 5*time.Second)
			if err != nil {
				t.Fatalf("%s gpu-only %v: %v", policy, gpuOnly, err)
			}
			want := 1
			if gpuOnly {
				want = 2
			}
			if row.Claims != 2 || row.Admitted != want {
				t.Errorf("%s gpu-only %v: admitted %d of %d; want %d of 2", policy, gpuOnly, row.Admitted, row.Claims, want)
			}
		}
	}
}

// The scheduler puts a pod without claims on the least allocated node
// that holds it, and nowhere when none does.
func TestTraceNodesPlace(t *testing.T) {
	tn := newTraceNodes([]openbNode{{name: "a", cpu: 8000, mem: 8192}, {name: "b", cpu: 8000, mem: 8192}}, nil, 1)
	tn.take("a", 2000, 1024, +1)
	task := func(name string, cpu int64) *openbTask { return &openbTask{name: name, cpu: cpu, mem: 1024} }
	if ok := tn.place(task("t1", 4000)); !ok || tn.at["t1"] != "b" {
		t.Fatalf("placed on %q (%v), want b: a has less free", tn.at["t1"], ok)
	}
	if ok := tn.place(task("t2", 5000)); !ok || tn.at["t2"] != "a" {
		t.Fatalf("placed on %q (%v), want a: b has 4 CPUs left", tn.at["t2"], ok)
	}
	if ok := tn.place(task("t3", 5000)); ok {
		t.Fatalf("placed on %q; no node has 5 CPUs left", tn.at["t3"])
	}
	tn.leave(task("t2", 5000))
	tn.take("a", 2000, 1024, -1)
	if ok := tn.place(task("t4", 5000)); !ok || tn.at["t4"] != "a" {
		t.Fatalf("after a's pods left, placed on %q (%v), want a", tn.at["t4"], ok)
	}
}

// The inflation trace names each task's node or "-" and each node's free
// GPUs, CPU and memory after the batch: the 6-CPU task that fits takes
// one of n0's two GPUs and 6 of its 8 CPUs; the second finds 2 CPUs.
func TestInflationTrace(t *testing.T) {
	dir := writeTrace(t, oneNodeTwoGPUs, oneGPUTask6CPU)
	var buf bytes.Buffer
	row, err := RunInflation(context.Background(), OpenBConfig{Dir: dir, InflationTrace: NewInflationTrace(&buf)}, Size{}, 1, PolicyDrasat, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var tasks, placed, nodes []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		f := strings.Split(line, "\t")
		switch {
		case f[0] == "task" && len(f) == 11:
			tasks = append(tasks, line)
			if f[10] != "-" {
				placed = append(placed, f[10])
			}
			if f[8] != "6000" || f[9] != "1024" {
				t.Errorf("task line %q: want cpu 6000, memory 1024", line)
			}
		case f[0] == "node" && len(f) == 10:
			nodes = append(nodes, strings.Join(f[4:], " "))
		default:
			t.Fatalf("line %q: not a task or node line", line)
		}
	}
	if len(tasks) != row.Claims || len(placed) != row.Admitted || row.Admitted != 1 {
		t.Fatalf("%d task lines, %d placed; the run had %d tasks, %d admitted (want 1)", len(tasks), len(placed), row.Claims, row.Admitted)
	}
	// One of the two GPUs taken, whichever.
	last := nodes[len(nodes)-1]
	if len(nodes) != row.Inflation.Batches || (last != "n0 0,8 2000 8000 64512 65536" && last != "n0 8,0 2000 8000 64512 65536") {
		t.Fatalf("node lines %q for %d batches; want one a batch, the last n0 with one GPU, 2000 milli-CPUs and 64512 MiB left", nodes, row.Inflation.Batches)
	}
}
