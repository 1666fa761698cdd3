package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/k8s"
	"github.com/drasat/drasat/model"
)

func explainCommand() *cli.Command {
	return &cli.Command{
		Name:      "explain",
		Usage:     "say why a ResourceClaim cannot be allocated (or did not get a better firstAvailable subrequest)",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "filename", Aliases: []string{"f"}, Usage: "file, directory or - (stdin) with ResourceSlices, DeviceClasses, ResourceClaims, Nodes, Pods; without it, the cluster's"},
			kubeconfigFlag(), contextFlag(),
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, Usage: "list every reason (text output groups near-identical ones)"},
			&cli.StringSliceFlag{Name: "claim", Aliases: []string{"c"}, Usage: "the claim to explain, NAMESPACE/NAME (or NAME in default); repeatable", Required: true},
			&cli.BoolFlag{Name: "what-if", Usage: "also name the fewest allocations whose release would let the claim fit"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			&cli.StringFlag{Name: "objective", Value: alloc.MaxClaims, Usage: "objective of the allocation run being explained: max-claims or ordered"},
			&cli.StringFlag{Name: "policy", Value: alloc.Binpack, Usage: "binpack or spread"},
			&cli.StringFlag{Name: "compat", Value: model.CompatKEP5963, Usage: "compatibility-group semantics: kep5963 or wildcard"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "budget for the whole command: two thirds for the allocation run, the rest for explaining"},
		},
		Action: runExplain,
	}
}

// claimExplanation is the answer for one --claim.
type claimExplanation struct {
	Claim string `json:"claim"`
	// Status: unallocated, allocated (by this run) or existing (allocated
	// in the input).
	Status       string                 `json:"status"`
	Devices      []string               `json:"devices,omitempty"`
	Explanations []*explain.Explanation `json:"explanations,omitempty"`
	// Drasat is what the adapter last recorded for the claim (annotations,
	// gated pods, and from a cluster its latest Event).
	Drasat *k8s.LastDecision `json:"drasat,omitempty"`
}

func runExplain(c *cli.Context) error {
	format := c.String("output")
	if format != "text" && format != "json" {
		return fmt.Errorf("flag --output: %q is not text or json", format)
	}
	timeout, err := timeoutFlag(c)
	if err != nil {
		return err
	}
	start := time.Now()
	// Explanations end a little before the command's deadline, so that
	// what they found is written: a claim the budget cut short says so
	// ("not reduced to a minimal set", or that the solver did not decide).
	deadline := start.Add(timeout - min(timeout/20, 200*time.Millisecond))
	ctx, cancel := commandContext(c, timeout)
	defer cancel()
	objs, _, err := loadObjects(ctx, c)
	if err != nil {
		return err
	}
	if err := input.CheckLimits(objs); err != nil {
		return err
	}
	compat := model.Options{Compat: c.String("compat")}
	var p, free *model.Problem
	err = interruptible(ctx, "building the problem", func() error {
		var err error
		if p, err = model.Build(ctx, objs, compat); err != nil {
			return err
		}
		free, err = model.Build(ctx, withoutAllocations(objs), compat)
		return err
	})
	if err != nil {
		return err
	}
	keys := make([]string, 0)
	for _, k := range c.StringSlice("claim") {
		if !strings.Contains(k, "/") {
			k = "default/" + k
		}
		keys = append(keys, k)
	}
	status := map[string]string{}
	for _, cl := range objs.Claims {
		k := cl.Namespace + "/" + cl.Name
		if cl.Status.Allocation != nil {
			status[k] = "existing"
		} else {
			status[k] = "unallocated"
		}
	}
	for _, k := range keys {
		if status[k] == "" {
			return fmt.Errorf("flag --claim: claim %s is not in the input", k)
		}
	}
	// What drasat last decided for the claims (from a cluster: with its
	// Events).
	decisions := map[string]*k8s.LastDecision{}
	var events kubernetes.Interface
	if len(c.StringSlice("filename")) == 0 {
		if events, err = clusterClient(c); err != nil {
			return err
		}
	}
	for _, cl := range objs.Claims {
		k := cl.Namespace + "/" + cl.Name
		if !slices.Contains(keys, k) {
			continue
		}
		if decisions[k], err = k8s.Decision(ctx, events, objs, cl); err != nil {
			return err
		}
	}
	res, err := alloc.Run(ctx, p, alloc.Options{
		Objective: c.String("objective"),
		Policy:    c.String("policy"),
		Timeout:   max(time.Until(start.Add(timeout*2/3)), time.Nanosecond),
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctxError(ctx, "allocating")
		}
		return err
	}
	allocs, assigned := allocations(objs, p, res)
	var out []claimExplanation
	for i, k := range keys {
		ce := claimExplanation{Claim: k, Status: status[k], Drasat: decisions[k]}
		if a, ok := assigned[k]; ok {
			ce.Status = "allocated"
			ce.Devices = deviceNames(p, a)
		}
		if ce.Status == "existing" {
			out = append(out, ce)
			continue
		}
		target := pendingClaim(free, k)
		others := make([]explain.Allocation, 0, len(allocs))
		for _, a := range allocs {
			if a.Claim != k {
				others = append(others, a)
			}
		}
		// Each claim gets an equal share of what is left, so that the
		// last one is not left without time by a hard first one.
		share := time.Until(deadline) / time.Duration(len(keys)-i)
		opts := explain.Options{Deadline: time.Now().Add(share), WhatIf: c.Bool("what-if")}
		if a, ok := assigned[k]; ok {
			// Allocated: explain each firstAvailable request that did not
			// get its first subrequest.
			for _, pk := range a.Picks {
				if pk.Alt == 0 {
					continue
				}
				done := false
				for _, x := range ce.Explanations {
					if x.Question == whyNot(target, pk.Req, 0) {
						done = true
					}
				}
				if done {
					continue
				}
				opts.Prefer = map[int]int{pk.Req: 0}
				x, err := explainInTime(ctx, free, target, others, opts, whyNot(target, pk.Req, 0))
				if err != nil {
					return err
				}
				ce.Explanations = append(ce.Explanations, x)
			}
			out = append(out, ce)
			continue
		}
		x, err := explainInTime(ctx, free, target, others, opts, explain.QuestionNotAllocated)
		if err != nil {
			return err
		}
		ce.Explanations = append(ce.Explanations, x)
		out = append(out, ce)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctxError(ctx, "explaining")
	}
	var buf bytes.Buffer
	if format == "json" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return err
		}
		buf.Write(append(b, '\n'))
	} else {
		writeExplanations(&buf, out, c.Bool("verbose"))
	}
	_, err = os.Stdout.Write(buf.Bytes())
	return err
}

// whyNot is the question Explain asks for a preferred alternative.
// explainInTime is explain.Explain within the command's budget. The
// explanations stop a little before the command's deadline, but one step
// that cannot stop midway (encoding a claim, on a loaded machine) can run
// past it: the claim is then answered as cut short, as the solver's
// budget running out is, instead of the command failing and writing
// nothing. An interrupt (Ctrl-C) still fails the command.
func explainInTime(ctx context.Context, p *model.Problem, target *model.Claim, others []explain.Allocation, opts explain.Options, question string) (*explain.Explanation, error) {
	if ctx.Err() == nil {
		x, err := explain.Explain(ctx, p, target, others, opts)
		if err == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return x, err
		}
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, ctxError(ctx, "explaining")
	}
	return &explain.Explanation{Claim: target.Key, Question: question, Reasons: []explain.Reason{{
		Kind: explain.KindUnknown, Message: "the time budget ran out before the claim was explained (raise --timeout)"}}}, nil
}

func whyNot(c *model.Claim, req, alt int) string {
	return "why can it not use " + c.Requests[req].Alternatives[alt].Name + "?"
}

// withoutAllocations copies objs with every claim pending, so that the
// problem built from it has every device free and every claim movable.
func withoutAllocations(objs *input.Objects) *input.Objects {
	out := *objs
	out.Claims = nil
	for _, c := range objs.Claims {
		if c.Status.Allocation != nil {
			c = c.DeepCopy()
			c.Status.Allocation = nil
		}
		out.Claims = append(out.Claims, c)
	}
	return &out
}

// allocations lists what holds devices after the run: the input's existing
// allocations and the run's own. It also returns the run's assignments by
// claim.
func allocations(objs *input.Objects, p *model.Problem, res *alloc.Result) ([]explain.Allocation, map[string]*alloc.Assignment) {
	var out []explain.Allocation
	for _, c := range objs.Claims {
		if c.Status.Allocation == nil {
			continue
		}
		a := explain.Allocation{Claim: c.Namespace + "/" + c.Name, Existing: true}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			a.Devices = append(a.Devices, input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device})
			a.Requests = append(a.Requests, r.Request)
		}
		out = append(out, a)
	}
	assigned := map[string]*alloc.Assignment{}
	for _, as := range res.Assignments {
		assigned[as.Claim.Key] = as
		a := explain.Allocation{Claim: as.Claim.Key}
		for _, pk := range as.Picks {
			if as.Claim.Requests[pk.Req].Alternatives[pk.Alt].AdminAccess {
				continue
			}
			a.Devices = append(a.Devices, p.Devices[pk.Dev].ID)
			a.Requests = append(a.Requests, as.Claim.Requests[pk.Req].Alternatives[pk.Alt].Name)
		}
		out = append(out, a)
	}
	return out, assigned
}

func pendingClaim(p *model.Problem, key string) *model.Claim {
	for _, c := range p.Claims {
		if c.Key == key {
			return c
		}
	}
	return nil
}

func deviceNames(p *model.Problem, a *alloc.Assignment) []string {
	var out []string
	for _, pk := range a.Picks {
		out = append(out, a.Claim.Requests[pk.Req].Alternatives[pk.Alt].Name+": "+p.Devices[pk.Dev].ID.String())
	}
	return out
}

func writeExplanations(buf *bytes.Buffer, out []claimExplanation, verbose bool) {
	for i, ce := range out {
		if i > 0 {
			buf.WriteString("\n")
		}
		switch ce.Status {
		case "existing":
			fmt.Fprintf(buf, "%s: already allocated in the input\n", ce.Claim)
			writeDecision(buf, ce.Drasat)
			continue
		case "allocated":
			fmt.Fprintf(buf, "%s: allocated (%s)\n", ce.Claim, strings.Join(ce.Devices, ", "))
			if len(ce.Explanations) == 0 {
				fmt.Fprintln(buf, "  nothing to explain: every request got its first choice")
			}
		default:
			fmt.Fprintf(buf, "%s: not allocated\n", ce.Claim)
		}
		if ce.Status != "existing" {
			writeDecision(buf, ce.Drasat)
		}
		for _, x := range ce.Explanations {
			fmt.Fprintf(buf, "%s\n", x.Question)
			writeReasons(buf, x.Reasons, verbose)
			if !x.Minimal {
				fmt.Fprintln(buf, "  (the budget ran out before these reasons were reduced to a minimal set)")
			}
			if w := x.WhatIf; w != nil {
				switch {
				case !w.Possible && w.Optimal:
					fmt.Fprintln(buf, "what if: releasing allocations does not help; the claim does not fit even with all allocations in its way released")
				case !w.Possible:
					fmt.Fprintln(buf, "what if: no answer within the budget (raise --timeout)")
				case len(w.Release) == 0:
					fmt.Fprintf(buf, "what if: it fits without releasing any allocation (%s)\n", strings.Join(w.Devices, ", "))
				default:
					fewest := "fewest"
					if !w.Optimal {
						fewest = "fewest found (not proven)"
					}
					fmt.Fprintf(buf, "what if: release %d allocation(s), the %s:\n", len(w.Release), fewest)
					for _, r := range w.Release {
						kind := "allocated by this run"
						if r.Existing {
							kind = "existing"
						}
						move := "evicted: no room elsewhere"
						if len(r.MovedTo) > 0 {
							move = "moves to " + strings.Join(r.MovedTo, ", ")
						}
						fmt.Fprintf(buf, "  - %s (%s) on %s: %s\n", r.Claim, kind, strings.Join(r.From, ", "), move)
					}
					fmt.Fprintf(buf, "  then %s gets %s\n", ce.Claim, strings.Join(w.Devices, ", "))
				}
			}
		}
	}
}

// writeDecision says what drasat last recorded for the claim.
func writeDecision(buf *bytes.Buffer, d *k8s.LastDecision) {
	if d == nil {
		return
	}
	if len(d.GatedPods) > 0 {
		fmt.Fprintf(buf, "waiting for drasat: used by gated pod(s) %s\n", strings.Join(d.GatedPods, ", "))
	}
	if d.AllocatedBy != "" {
		fmt.Fprintf(buf, "drasat allocated it (%s)\n", d.AllocatedBy)
	}
	if d.Unallocatable != "" {
		fmt.Fprintf(buf, "drasat's last pass found it unallocatable: %s\n", d.Unallocatable)
	}
	if e := d.Event; e != nil {
		fmt.Fprintf(buf, "drasat's last event: %s %s: %s", e.Time.UTC().Format(time.RFC3339), e.Reason, e.Message)
		if e.Count > 1 {
			fmt.Fprintf(buf, " (%d times)", e.Count)
		}
		buf.WriteString("\n")
	}
}

// groupAfter is how many reasons of one kind (and request) are listed
// one by one; more become one line with counts and examples.
const groupAfter = 3

// kindNoun names a group of reasons of one kind.
var kindNoun = map[string]string{
	explain.KindCounter:            "counter sets used up",
	explain.KindDevice:             "devices allocated to other claims",
	explain.KindCompat:             "compatibility-group conflicts",
	explain.KindCompatibleOnlyWith: "compatibleOnlyWith conflicts",
	explain.KindAllocation:         "allocations in the way",
	explain.KindNode:               "node conflicts",
	explain.KindConstraint:         "constraint conflicts",
	explain.KindNoMatch:            "requests no device matches",
	explain.KindCount:              "requests short of devices",
}

// writeReasons lists reasons, grouping a kind with more than groupAfter
// near-identical reasons (a claim that lost to others on 64 GPUs: one per
// counter set) into one line with counts and two examples; verbose lists
// them all.
func writeReasons(buf *bytes.Buffer, reasons []explain.Reason, verbose bool) {
	type group struct {
		key     string
		reasons []explain.Reason
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, r := range reasons {
		k := r.Kind + "\x00" + r.Request
		g := byKey[k]
		if g == nil {
			g = &group{key: k}
			byKey[k] = g
			groups = append(groups, g)
		}
		g.reasons = append(g.reasons, r)
	}
	for _, g := range groups {
		if verbose || len(g.reasons) <= groupAfter {
			for _, r := range g.reasons {
				fmt.Fprintf(buf, "  - %s\n", r.Message)
			}
			continue
		}
		r0 := g.reasons[0]
		noun := kindNoun[r0.Kind]
		if noun == "" {
			noun = r0.Kind + " reasons"
		}
		claims := map[string]bool{}
		nodes := map[string]bool{}
		for _, r := range g.reasons {
			for _, c := range r.Claims {
				claims[c] = true
			}
			if r.Node != "" {
				nodes[r.Node] = true
			}
		}
		fmt.Fprintf(buf, "  - %d %s", len(g.reasons), noun)
		if r0.Request != "" {
			fmt.Fprintf(buf, " (request %s)", r0.Request)
		}
		if len(claims) > 0 {
			fmt.Fprintf(buf, ", by %d claim(s)", len(claims))
		}
		if len(nodes) > 0 {
			fmt.Fprintf(buf, ", on %d node(s)", len(nodes))
		}
		fmt.Fprintf(buf, "; e.g. %s; %s (all %d with -v or -o json)\n", g.reasons[0].Message, g.reasons[1].Message, len(g.reasons))
	}
}
