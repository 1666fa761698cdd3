package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/input"
)

func runExportCmd(args ...string) error {
	app := &cli.App{Name: "drasat", Commands: []*cli.Command{exportCommand()}, ExitErrHandler: func(*cli.Context, error) {}}
	return app.RunContext(context.Background(), append([]string{"drasat", "export"}, args...))
}

// TestExport: a generated instance written as objects loads back as the
// same problem, and its LP names every pending claim; bad flags are
// errors naming them.
func TestExport(t *testing.T) {
	dir := t.TempDir()
	objs, lp := filepath.Join(dir, "objs.yaml"), filepath.Join(dir, "m.lp")
	if err := runExportCmd("-s", "mig", "--size", "2x2:12", "--mig-family", "independent", "--objects", objs, "--lp", lp); err != nil {
		t.Fatal(err)
	}
	loaded, _, err := input.Load([]string{objs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	insts, err := bench.Generate("mig", bench.Size{Nodes: 2, GPUs: 2, Claims: 12}, 1, bench.GenerateOptions{MIGFamily: "independent"})
	if err != nil {
		t.Fatal(err)
	}
	want := insts[0].Objs
	if len(loaded.Slices) != len(want.Slices) || len(loaded.Claims) != len(want.Claims) || len(loaded.Nodes) != len(want.Nodes) ||
		!reflect.DeepEqual(loaded.Claims[len(want.Claims)-1].Spec, want.Claims[len(want.Claims)-1].Spec) {
		t.Errorf("objects written and loaded back differ from the generated ones")
	}
	b, err := os.ReadFile(lp)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, s := range []string{"Maximize", "Subject To", "Binaries", "End", "claim 11 default/claim-0011"} {
		if !strings.Contains(text, s) {
			t.Errorf("LP lacks %q", s)
		}
	}
	agg := filepath.Join(dir, "agg.lp")
	if err := runExportCmd("-f", objs, "--aggregate-lp", agg); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(agg); err != nil || !strings.Contains(string(b), "Generals") || !strings.Contains(string(b), "c0_0") {
		t.Errorf("aggregated model: %v\n%s", err, b)
	}
	// The LP of the files equals the LP of the generated instance.
	lp2 := filepath.Join(dir, "m2.lp")
	if err := runExportCmd("-f", objs, "--lp", lp2); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(lp2); string(b2) != text {
		t.Error("the LP of the written objects differs from the LP of the generated instance")
	}
	for _, args := range [][]string{
		{"-s", "mig", "--size", "2x2:12"},          // nothing to write
		{"--lp", lp},                               // no problem
		{"-s", "mig", "--size", "2x2", "--lp", lp}, // bad size
		{"-s", "mig", "--size", "2x2:4", "--mig-family", "x", "--lp", lp},
		{"-s", "openb", "--size", "2:4", "--lp", lp},
		{"-f", objs, "-s", "mig", "--size", "2x2:4", "--lp", lp},
	} {
		if err := runExportCmd(args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
