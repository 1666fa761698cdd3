package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// InflationTrace writes what each batch of the inflation simulation
// decided, tab-separated, for finding out why a policy turned tasks away
// (docs/performance.md, "The trace replays with pods"). Two kinds of
// line, each starting with policy, seed and batch:
//
//	task  POLICY SEED BATCH TASK CLASS COUNT PROFILE CPU_MILLI MEM_MIB NODE   (NODE "-": turned away)
//	node  POLICY SEED BATCH NODE GPUS_FREE CPU_LEFT CPU MEM_LEFT MEM         (after the batch)
//
// GPUS_FREE is each GPU's memory slices left (8 when an A100 is whole),
// comma-separated; CPU in milli-CPUs, memory in MiB, of the tasks placed
// on the node (CPU-only ones too).
type InflationTrace struct {
	mu sync.Mutex
	w  io.Writer
}

// NewInflationTrace writes to w.
func NewInflationTrace(w io.Writer) *InflationTrace {
	return &InflationTrace{w: w}
}

func (t *InflationTrace) batch(ctx context.Context, policy string, seed uint64, n int, base *input.Objects,
	running, batch, allocated []*resourceapi.ResourceClaim, drawn map[string]*openbTask, tn *traceNodes) error {
	var b bytes.Buffer
	node := map[string]string{}
	for _, c := range allocated {
		node[c.Name] = tn.nodeOf(c)
	}
	for _, c := range batch {
		r := c.Spec.Devices.Requests[0].Exactly
		profile := "-"
		if len(r.Selectors) > 0 && r.Selectors[0].CEL != nil {
			if _, after, ok := strings.Cut(r.Selectors[0].CEL.Expression, "profile == '"); ok {
				profile = strings.TrimSuffix(after, "'")
			}
		}
		var cpu, mem int64
		if task := drawn[c.Name]; task != nil {
			cpu, mem = task.cpu, task.mem
		}
		at := node[c.Name]
		if at == "" {
			at = "-"
		}
		fmt.Fprintf(&b, "task\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", policy, seed, n, c.Name, r.DeviceClassName, r.Count, profile, cpu, mem, at)
	}
	st, err := clusterState(ctx, base, running)
	if err != nil {
		return err
	}
	free := map[int][]string{}
	for g, cs := range st.P.CounterSets {
		n := st.P.CommonNode(cs.Devices)
		free[n] = append(free[n], fmt.Sprint(freeSlices(st, g)))
	}
	for j, nd := range st.P.Nodes {
		i, ok := tn.index[nd.Name]
		if !ok {
			continue
		}
		tnode := tn.nodes[i]
		fmt.Fprintf(&b, "node\t%s\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\n", policy, seed, n, nd.Name, strings.Join(free[j], ","),
			tnode.cpu-tn.cpu[i], tnode.cpu, tnode.mem-tn.mem[i], tnode.mem)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err = t.w.Write(b.Bytes())
	return err
}

// freeSlices is how many of counter set g's memory-slice counters are
// free (the MIG GPU's memory slices); for a set without them, its first
// counter left.
func freeSlices(st *model.State, g int) int64 {
	cs := st.P.CounterSets[g]
	n, any := int64(0), false
	for j, name := range cs.Counters {
		if strings.HasPrefix(name, "memory-slice-") {
			any = true
			if st.Free(g, j) > 0 {
				n++
			}
		}
	}
	if !any {
		return st.Free(g, 0)
	}
	return n
}
