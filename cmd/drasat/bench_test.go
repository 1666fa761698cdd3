package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/bench"
)

// benchFlags parses `drasat bench args...` into a configuration without
// running anything.
func benchFlags(t *testing.T, args ...string) (bench.Config, error) {
	t.Helper()
	cmd := benchCommand()
	var cfg bench.Config
	var cfgErr error
	ran := false
	cmd.Action = func(c *cli.Context) error {
		ran = true
		cfg, cfgErr = benchConfig(c)
		return nil
	}
	app := &cli.App{Name: "drasat", Commands: []*cli.Command{cmd}, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.RunContext(context.Background(), append([]string{"drasat", "bench"}, args...)); err != nil {
		return cfg, err
	}
	if !ran {
		t.Fatal("bench action did not run")
	}
	return cfg, cfgErr
}

func TestBenchMIGGPUFlag(t *testing.T) {
	for args, want := range map[string]string{"": "a100", "--mig-gpu a100": "a100", "--mig-gpu h100": "h100",
		"--mig-gpu mixed": "mixed", "--mig-gpu H100": "h100", "--mig-gpu=Mixed": "mixed"} {
		cfg, err := benchFlags(t, strings.Fields(args)...)
		if err != nil || cfg.MIGGPU != want {
			t.Errorf("%q: MIGGPU %q, %v; want %q", args, cfg.MIGGPU, err, want)
		}
	}
	for _, bad := range []string{"a10", "v100", "h100,a100", "all"} {
		_, err := benchFlags(t, "--mig-gpu", bad)
		if err == nil || !strings.Contains(err.Error(), "flag --mig-gpu") || !strings.Contains(err.Error(), "a100, h100, mixed") {
			t.Errorf("--mig-gpu %s: err = %v, want one naming the flag and its values", bad, err)
		}
	}
}

// runBenchCmd runs the real `drasat bench` in-process.
func runBenchCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = outF
	defer func() { os.Stdout = old }()
	app := &cli.App{Name: "drasat", Commands: []*cli.Command{benchCommand()}, ExitErrHandler: func(*cli.Context, error) {}}
	err = app.RunContext(context.Background(), append([]string{"drasat", "bench"}, args...))
	outF.Close()
	out, _ := os.ReadFile(outF.Name())
	return string(out), err
}

func TestBenchMIGGPURun(t *testing.T) {
	js := filepath.Join(t.TempDir(), "rep.json")
	out, err := runBenchCmd(t, "-s", "mig", "--size", "2x2:10", "-p", "first-fit", "--mig-gpu", "mixed", "--no-progress", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mig 2x2:10 mixed") {
		t.Errorf("table does not name the fleet:\n%s", out)
	}
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Rows[0].Instance != "mig 2x2:10 mixed" {
		t.Fatalf("rows %+v", rep.Rows)
	}
	models := map[string]bool{}
	for _, g := range rep.Rows[0].Picture {
		models[g.Model] = true
	}
	if !models["NVIDIA A100-SXM4-40GB"] || !models["NVIDIA H100 80GB HBM3"] || len(models) != 2 {
		t.Errorf("pictured models %v, want A100 and H100", models)
	}

	// The default stays the A100 fleet and its instance names.
	out, err = runBenchCmd(t, "-s", "mig", "--size", "2x2:10", "-p", "first-fit", "--no-progress")
	if err != nil || !strings.Contains(out, "mig 2x2:10  ") || strings.Contains(out, "a100") {
		t.Errorf("default run: %v\n%s", err, out)
	}

	// A bad value fails before anything runs.
	out, err = runBenchCmd(t, "-s", "mig", "--size", "2x2:10", "--mig-gpu", "b200", "--no-progress")
	if err == nil || !strings.Contains(err.Error(), `flag --mig-gpu: mig GPU fleet "b200"`) || out != "" {
		t.Errorf("--mig-gpu b200: err = %v, output %q", err, out)
	}
}

func TestBenchMIGFamilyFlags(t *testing.T) {
	cfg, err := benchFlags(t, "--mig-family", "independent", "--mig-family", "Whole", "--mig-mix", "multi=0.5,prealloc-max=3")
	if err != nil || strings.Join(cfg.MIGFamilies, ",") != "independent,whole" || cfg.MIGMix["multi"] != 0.5 || cfg.MIGMix["prealloc-max"] != 3 {
		t.Errorf("families %v, mix %v, err %v", cfg.MIGFamilies, cfg.MIGMix, err)
	}
	for flag, bad := range map[string]string{"--mig-family": "odd", "--mig-mix": "multi=7"} {
		if _, err := benchFlags(t, flag, bad); err == nil || !strings.Contains(err.Error(), "flag "+flag) {
			t.Errorf("%s %s: err = %v, want one naming the flag", flag, bad, err)
		}
	}
}

// --inflation-trace is refused without the inflation scenario, before
// anything runs.
func TestInflationTraceNeedsInflation(t *testing.T) {
	_, _, err := runApp(t, "bench", "-s", "mig", "--size", "1x1:1", "--inflation-trace", filepath.Join(t.TempDir(), "t.tsv"))
	if err == nil || !strings.Contains(err.Error(), "only the inflation scenario writes one") {
		t.Fatalf("%v; want --inflation-trace refused", err)
	}
}
