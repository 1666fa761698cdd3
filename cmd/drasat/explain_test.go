package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/k8s"
	"github.com/drasat/drasat/model"
)

func TestValidateExamplesClean(t *testing.T) {
	for _, dir := range exampleDirs(t) {
		stdout, stderr, err := runCLI(t, "validate", "-f", filepath.Join(examplesDir, dir))
		if err != nil || stdout != "" {
			t.Errorf("validate %s: %v\n%s%s", dir, err, stdout, stderr)
		}
	}
}

func TestValidateReportsAndFails(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	doc := "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\nspec:\n  driver: x.example.com\n  nodeName: n1\n  pool: {name: p, generation: 1, resourceSliceCount: 1}\n  devices:\n  - name: d\n    consumesCounters: [{counterSet: nope, counters: {c: {value: '1'}}}]\n"
	if err := os.WriteFile(bad, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err := runCLI(t, "validate", "-f", bad, "-o", "json")
	if err == nil {
		t.Fatal("validate of a bad slice succeeded")
	}
	var out struct {
		Errors   int
		Findings []struct{ Origin, Slice, Device, Field, Message string }
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if out.Errors != 1 || out.Findings[0].Origin != bad+"#1" || out.Findings[0].Device != "d" ||
		out.Findings[0].Field != "spec.devices[0].consumesCounters[0].counterSet" || !strings.Contains(out.Findings[0].Message, `counter set "nope" does not exist`) {
		t.Fatalf("unexpected findings: %s", stdout)
	}
}

func TestExplainTPU(t *testing.T) {
	stdout, stderr, err := runCLI(t, "explain", "-f", filepath.Join(examplesDir, "tpu-multihost"), "--claim", "train-4x8", "--what-if", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out []claimExplanation
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(out) != 1 || out[0].Status != "unallocated" || len(out[0].Explanations) != 1 {
		t.Fatalf("unexpected output: %s", stdout)
	}
	x := out[0].Explanations[0]
	if !x.Minimal || len(x.Reasons) == 0 || x.Reasons[0].Kind != "counter" || len(x.Reasons[0].Claims) == 0 {
		t.Fatalf("want a minimal counter reason naming claims: %s", stdout)
	}
	if w := x.WhatIf; w == nil || !w.Possible || len(w.Release) == 0 || len(w.Devices) != 1 {
		t.Fatalf("want a what-if answer: %s", stdout)
	}
}

func TestExplainFirstChoices(t *testing.T) {
	stdout, _, err := runCLI(t, "explain", "-f", filepath.Join(examplesDir, "mig-a100"), "--claim", "default/mig-devices")
	if err != nil || !strings.Contains(stdout, "default/mig-devices: allocated") || !strings.Contains(stdout, "nothing to explain") {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if _, _, err := runCLI(t, "explain", "-f", filepath.Join(examplesDir, "mig-a100"), "--claim", "nope"); err == nil || !strings.Contains(err.Error(), "default/nope is not in the input") {
		t.Fatalf("unknown claim: %v", err)
	}
}

// TestTimeoutWritesNothing: a command stopped by --timeout fails and writes
// nothing to stdout.
func TestTimeoutWritesNothing(t *testing.T) {
	for _, args := range [][]string{
		{"explain", "-f", filepath.Join(examplesDir, "mig-a100"), "--claim", "mig-devices", "--timeout", "1ns"},
		{"validate", "-f", filepath.Join(examplesDir, "mig-a100"), "--timeout", "1ns"},
	} {
		stdout, _, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "--timeout reached") || stdout != "" {
			t.Errorf("%s: err %v, stdout %q; want a timeout error and no output", args[0], err, stdout)
		}
	}
}

// 64 near-identical reasons (a claim that lost to others on 64 GPUs: one
// counter set each) read as one line with counts and examples; -v lists
// them all. Reasons of other kinds stay as they are.
func TestExplainGroupsReasons(t *testing.T) {
	var reasons []explain.Reason
	for i := range 64 {
		reasons = append(reasons, explain.Reason{Kind: explain.KindCounter, Request: "gpu",
			Claims:  []string{fmt.Sprintf("ml/job-%d", i%40)},
			Message: fmt.Sprintf("request gpu: counters of counter set gpu-%d-counters used up by ml/job-%d", i, i%40)})
	}
	reasons = append(reasons, explain.Reason{Kind: explain.KindNode, Message: "the devices cannot all be reached from one node"})
	out := []claimExplanation{{Claim: "ml/big", Status: "unallocated", Drasat: &k8s.LastDecision{Unallocatable: "no room", GatedPods: []string{"ml/big-0"}},
		Explanations: []*explain.Explanation{{Question: "why?", Reasons: reasons, Minimal: true}}}}
	var grouped, all bytes.Buffer
	writeExplanations(&grouped, out, false)
	writeExplanations(&all, out, true)
	g := grouped.String()
	if n := strings.Count(g, "\n  - "); n != 2 {
		t.Errorf("grouped output has %d reason lines, want 2:\n%s", n, g)
	}
	for _, want := range []string{"64 counter sets used up (request gpu), by 40 claim(s); e.g. ", "gpu-0-counters", "gpu-1-counters", "(all 64 with -v or -o json)",
		"the devices cannot all be reached", "gated pod(s) ml/big-0", "unallocatable: no room"} {
		if !strings.Contains(g, want) {
			t.Errorf("grouped output lacks %q:\n%s", want, g)
		}
	}
	if n := strings.Count(all.String(), "\n  - "); n != 65 {
		t.Errorf("-v lists %d reasons, want 65", n)
	}
}

// TestExplainShareOfTheBudget: with more claims than the budget can reduce
// to minimal reasons, explain still answers for every claim (each gets its
// share of the time, and says when it was cut short) instead of failing
// with a timeout and writing nothing.
func TestExplainShareOfTheBudget(t *testing.T) {
	dir := t.TempDir()
	objects := filepath.Join(dir, "cluster.yaml")
	app := &cli.App{Name: "drasat", Commands: []*cli.Command{exportCommand()}, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.RunContext(context.Background(), []string{"drasat", "export", "-s", "mig", "--size", "8x8:300", "--objects", objects}); err != nil {
		t.Fatal(err)
	}
	// The budget covers loading and building too, which -race or a busy
	// machine slows tenfold: give explain six times what validating took
	// here plus 5 s, still far less than minimal reasons for all 300 claims
	// take (~50 s quiet, ten times that under -race).
	start := time.Now()
	if _, stderr, err := runCLI(t, "validate", "-f", objects); err != nil {
		t.Fatalf("validate: %v\n%s", err, stderr)
	}
	budget := 6*time.Since(start) + 5*time.Second
	args := []string{"explain", "-f", objects, "--timeout", budget.Round(time.Millisecond).String(), "--what-if", "-o", "json"}
	for i := range 300 {
		args = append(args, "--claim", fmt.Sprintf("claim-%04d", i))
	}
	stdout, stderr, err := runCLI(t, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var out []claimExplanation
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 300 {
		t.Fatalf("%d claims answered, want 300", len(out))
	}
	for _, ce := range out {
		if ce.Status == "unallocated" && len(ce.Explanations) != 1 {
			t.Errorf("%s: %d explanations, want 1", ce.Claim, len(ce.Explanations))
		}
	}
}

// A claim the command's deadline has passed for is answered as cut short
// (one explanation, reason unknown), not with an error that would leave
// the whole output unwritten; an interrupt still fails the command.
func TestExplainPastTheDeadline(t *testing.T) {
	objs, _, err := input.Load([]string{filepath.Join(examplesDir, "mig-a100")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	free, err := model.Build(context.Background(), withoutAllocations(objs), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	target := free.Claims[0]
	past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	x, err := explainInTime(past, free, target, nil, explain.Options{Deadline: time.Now()}, explain.QuestionNotAllocated)
	if err != nil {
		t.Fatalf("past the deadline: %v", err)
	}
	if x.Claim != target.Key || len(x.Reasons) != 1 || x.Reasons[0].Kind != explain.KindUnknown {
		t.Errorf("past the deadline: %+v", x)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	if _, err := explainInTime(stopped, free, target, nil, explain.Options{Deadline: time.Now().Add(time.Second)}, explain.QuestionNotAllocated); err == nil {
		t.Error("interrupted: no error")
	}
}
