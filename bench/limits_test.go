package bench

import (
	"context"
	"github.com/drasat/drasat/input"
	"strings"
	"testing"
)

// Sizes past drasat's limits are refused before anything is generated;
// sizes within them pass.
func TestRunRefusesSizesBeyondLimits(t *testing.T) {
	for _, tt := range []struct {
		scenario, size, want string
	}{
		{"mig", "100000x100000:1", "more devices than drasat's limit"},
		{"mig", "3000x8:10", "more than drasat's limit of 500000"},
		{"mig", "99999999999x99999999999:1", "nodes, more than drasat's limit"},
		{"modes", "8x4:200000", "claims, more than drasat's limit"},
		{"tpu", "160000:1", "nodes, more than drasat's limit"},
	} {
		sz, err := ParseSize(tt.size)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckSize(tt.scenario, sz, GenerateOptions{MIGGPU: "mixed"}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %s: %v, want %q", tt.scenario, tt.size, err, tt.want)
		}
	}
	// Run checks every size before generating anything.
	_, err := Run(context.Background(), Config{Scenarios: []string{"mig"},
		Sizes: map[string][]Size{"mig": {{Nodes: 2, GPUs: 2, Claims: 5}, {Nodes: 100000, GPUs: 100000, Claims: 1}}}, Policies: []string{PolicyFirstFit}})
	if err == nil || !strings.Contains(err.Error(), "100000x100000:1") {
		t.Errorf("Run: %v, want the size refused", err)
	}
	for _, sc := range []string{"mig", "modes", "tpu"} {
		sz := Size{Nodes: 16, GPUs: 8, Claims: input.MaxClaims}
		if err := CheckSize(sc, sz, GenerateOptions{}); err != nil {
			t.Errorf("%s %s: %v", sc, sz, err)
		}
	}
}

func TestRunRefusesEndlessRepeats(t *testing.T) {
	_, err := Run(context.Background(), Config{Scenarios: []string{"mig"}, Repeat: 1 << 40, Policies: []string{PolicyFirstFit}})
	if err == nil || !strings.Contains(err.Error(), "more than 100 runs") {
		t.Fatalf("Run: %v, want the repeat refused", err)
	}
}

// A cancelled run stops before its next instance.
func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Config{Scenarios: []string{"mig"}, Sizes: map[string][]Size{"mig": {{Nodes: 2, GPUs: 2, Claims: 5}}}, Policies: []string{PolicyFirstFit}})
	if err == nil {
		t.Fatal("no error from a cancelled run")
	}
}
