package alloc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/drasat/drasat/model"
)

// Allocated returns copies of the pending claims, each unchanged but for
// status.allocation of the admitted ones, in input order.
func Allocated(p *model.Problem, res *Result) ([]*resourceapi.ResourceClaim, error) {
	byClaim := map[int]*Assignment{}
	for _, a := range res.Assignments {
		byClaim[a.Claim.Index] = a
	}
	var out []*resourceapi.ResourceClaim
	for _, c := range p.Claims {
		obj := c.Obj.DeepCopy()
		obj.APIVersion, obj.Kind = resourceapi.SchemeGroupVersion.String(), "ResourceClaim"
		if a, ok := byClaim[c.Index]; ok {
			ar, err := AllocationResult(p, a)
			if err != nil {
				return nil, err
			}
			obj.Status.Allocation = ar
		}
		out = append(out, obj)
	}
	return out, nil
}

// WriteClaims writes claims as multi-document YAML or as a JSON List.
func WriteClaims(w io.Writer, format string, claims []*resourceapi.ResourceClaim) error {
	var buf bytes.Buffer
	switch format {
	case "yaml", "":
		for i, c := range claims {
			if i > 0 {
				buf.WriteString("---\n")
			}
			b, err := yaml.Marshal(c)
			if err != nil {
				return err
			}
			buf.Write(b)
		}
	case "json":
		list := map[string]any{"apiVersion": "v1", "kind": "List", "items": claims}
		b, err := json.MarshalIndent(list, "", "  ")
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	default:
		return fmt.Errorf("output format %q: want yaml, json or table", format)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// WriteTable prints one row per allocated device: claim, request, device,
// node.
func WriteTable(w io.Writer, p *model.Problem, res *Result) error {
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tREQUEST\tDEVICE\tNODE")
	for _, a := range res.Assignments {
		node := "*"
		if a.Node >= 0 {
			node = p.Nodes[a.Node].Name
		}
		for _, pk := range a.Picks {
			alt := a.Claim.Requests[pk.Req].Alternatives[pk.Alt]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", Printable(a.Claim.Key), Printable(alt.Name), Printable(p.Devices[pk.Dev].ID.String()), Printable(node))
		}
	}
	for _, c := range p.Claims {
		if reason, ok := res.Rejected[c.Index]; ok {
			fmt.Fprintf(tw, "%s\t-\t-\t(%s)\n", Printable(c.Key), Printable(firstLine(reason.Error())))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Printable quotes a name holding control or other unprintable characters
// (a tab, an escape sequence, a carriage return), so that a hostile input
// can neither break the table's columns nor drive the terminal.
func Printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Report is the machine-readable summary written by --report.
type Report struct {
	Pending     int              `json:"pending"`
	Allocated   int              `json:"allocated"`
	Unallocated int              `json:"unallocated"`
	Objective   string           `json:"objective"`
	Policy      string           `json:"policy"`
	Values      map[string]int64 `json:"objectiveValues"`
	Optimal     bool             `json:"optimal"`
	Bound       int64            `json:"bound"`
	Gap         float64          `json:"gap"`
	// ReadSeconds is reading and decoding the input, outside --timeout
	// (set by the caller); BuildSeconds building the problem, inside it.
	ReadSeconds        float64           `json:"readSeconds"`
	BuildSeconds       float64           `json:"buildSeconds"`
	EncodeSeconds      float64           `json:"encodeSeconds"`
	SolveSeconds       float64           `json:"solveSeconds"`
	BoundSeconds       float64           `json:"boundSeconds"`
	HeuristicSecs      float64           `json:"heuristicSeconds"`
	BoundIterations    int               `json:"boundIterations"`
	NeighbourhoodSecs  float64           `json:"neighbourhoodSeconds"`
	NeighbourhoodSteps int               `json:"neighbourhoodSteps"`
	Variables          int               `json:"variables"`
	Clauses            int               `json:"clauses"`
	SolverCalls        int               `json:"solverCalls"`
	Components         int               `json:"components"`
	ImpliedCounters    int               `json:"impliedCountersDropped"`
	UnprovenParts      int               `json:"componentsNotProven"`
	GreedyOnlyParts    int               `json:"componentsWithoutSAT"`
	UnallocatedWhy     map[string]string `json:"unallocatedReasons,omitempty"`
	// UnallocatedKind is each unallocated claim's model.Reason
	// (Capacity, NodeResources, NoPlacement, NoNode, Invalid...): what a
	// script acts on, where unallocatedReasons is for people.
	UnallocatedKind map[string]model.Reason `json:"unallocatedKinds,omitempty"`
	PoolsNotUsed    []string                `json:"poolsNotUsed,omitempty"`
	// CELCost is what building the problem spent on CEL selectors, out of
	// its budget (model.DefaultCELCost).
	CELCost uint64 `json:"celCost"`
	// Stages is the time of each pipeline stage, summed over the
	// components.
	Stages []StageTime `json:"stages"`
}

// NewReport summarises a run.
func NewReport(p *model.Problem, res *Result, opts Options) *Report {
	st := res.Stats
	r := &Report{
		Pending: st.Pending, Allocated: st.Admitted, Unallocated: st.Pending - st.Admitted,
		Objective: opts.Objective, Policy: opts.Policy,
		Values: map[string]int64{
			"admitted":              st.Objective,
			"greedy":                st.Greedy,
			"firstAvailablePenalty": st.FirstAvailablePenalty,
			"counterSetsTouched":    int64(st.CounterSetsTouched),
		},
		Optimal: st.Optimal, Bound: st.Bound, Gap: st.Gap(), CELCost: p.CELCost,
		EncodeSeconds: st.EncodeTime.Seconds(), SolveSeconds: st.SolveTime.Seconds(),
		BoundSeconds: st.BoundTime.Seconds(), HeuristicSecs: st.HeuristicTime.Seconds(), BoundIterations: st.BoundIterations,
		NeighbourhoodSecs: st.NeighbourhoodTime.Seconds(), NeighbourhoodSteps: st.NeighbourhoodSteps,
		Variables: st.Variables, Clauses: st.Clauses, SolverCalls: st.SolverCalls,
		Components: st.Components, ImpliedCounters: st.ImpliedCounters,
		UnprovenParts: st.ComponentsNotProven, GreedyOnlyParts: st.ComponentsWithoutSAT,
		UnallocatedWhy: map[string]string{}, UnallocatedKind: map[string]model.Reason{},
		Stages: st.Stages,
	}
	for _, c := range p.Claims {
		if why, ok := res.Rejected[c.Index]; ok {
			r.UnallocatedWhy[c.Key] = why.Error()
			r.UnallocatedKind[c.Key] = model.ReasonOf(why)
		}
	}
	for _, is := range p.Issues {
		r.PoolsNotUsed = append(r.PoolsNotUsed, is.String())
	}
	return r
}
