package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// runApp runs the real command line (newApp) on args and returns what
// urfave/cli wrote to its stdout and stderr writers.
func runApp(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	argv := append([]string{"drasat"}, args...)
	app := newApp(argv, &out, &errb)
	app.ExitErrHandler = func(*cli.Context, error) {} // never os.Exit in a test
	err = app.Run(argv)
	return out.String(), errb.String(), err
}

// Usage errors fail (exit 1 in main) with the help on stderr; help asked
// for goes to stdout and succeeds.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args     []string
		fails    bool
		stderr   string // substring of stderr or the error
		helpOnly bool   // stdout holds the help
	}{
		{args: []string{"frobnicate"}, fails: true, stderr: `unknown command "frobnicate"`},
		{args: nil, fails: true, stderr: "no command given"},
		{args: []string{"allocate", "--bogus"}, fails: true, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"validate", "-f", dir, "extra.yaml"}, fails: true, stderr: `unexpected argument "extra.yaml"`},
		{args: []string{"--help"}, helpOnly: true},
		{args: []string{"allocate", "--help"}, helpOnly: true},
		{args: []string{"help", "allocate"}, helpOnly: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, err := runApp(t, tt.args...)
			if tt.helpOnly {
				if err != nil || !strings.Contains(stdout, "USAGE") || stderr != "" {
					t.Fatalf("err %v, stdout %q, stderr %q; want the help on stdout", err, stdout, stderr)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; stdout %q", stdout)
			}
			if stdout != "" {
				t.Errorf("a usage error wrote to stdout: %q", stdout)
			}
			if !strings.Contains(stderr, "USAGE") {
				t.Errorf("no help on stderr: %q", stderr)
			}
			if !strings.Contains(stderr+err.Error(), tt.stderr) {
				t.Errorf("stderr %q and error %v do not say %q", stderr, err, tt.stderr)
			}
		})
	}
}

func TestAllocateEmptyDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := runCLI(t, "allocate", "-f", dir); err == nil || !strings.Contains(err.Error(), "no .yaml, .yml or .json file") {
		t.Fatalf("allocate -f EMPTY_DIR: %v, want an error", err)
	}
}

// The report replaces a symlink placed at its path instead of writing
// through it, follows none placed where a temporary file might be, and
// leaves no temporary file behind.
func TestReportDoesNotFollowSymlinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	for _, link := range []string{report, report + ".tmp"} {
		if err := os.Symlink(victim, link); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, err := runCLI(t, "allocate", "-f", filepath.Join(examplesDir, "mig-a100"), "--report", report); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	st, err := os.Lstat(report)
	if err != nil || !st.Mode().IsRegular() {
		t.Fatalf("report is not a regular file: %v %v", st, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("files left in the directory: %v", entries)
	}
}

// Control characters in names are quoted in table output.
func TestTableEscapesControlCharacters(t *testing.T) {
	input := strings.Replace(hugeCounters(), "metadata: {name: c0, namespace: default}", `metadata: {name: "c0\t\e[2J", namespace: default}`, 1)
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, []byte(input), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, "allocate", "-f", path, "-o", "table")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.ContainsAny(stdout+stderr, "\x1b\t") {
		t.Fatalf("raw control characters in the output:\n%q\n%q", stdout, stderr)
	}
	if !strings.Contains(stdout, `"default/c0\t\x1b[2J"`) {
		t.Errorf("the claim name is not quoted:\n%s", stdout)
	}
}

// bench refuses sizes past drasat's limits before generating anything, and
// returns at once when interrupted.
func TestBenchBoundedAndInterruptible(t *testing.T) {
	if _, err := runBenchCmd(t, "--size", "100000x100000:1", "-p", "first-fit", "--no-progress"); err == nil ||
		!strings.Contains(err.Error(), "more devices than drasat's limit") {
		t.Fatalf("bench --size 100000x100000:1: %v, want the size refused", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C before the run
	app := &cli.App{Name: "drasat", Commands: []*cli.Command{benchCommand()}, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.RunContext(ctx, []string{"drasat", "bench", "--size", "16x8:1000", "-p", "upstream", "--no-progress"})
	if err == nil || !strings.Contains(err.Error(), "bench: interrupted") {
		t.Fatalf("interrupted bench: %v", err)
	}
}

// An expensive CEL selector cannot hold allocate past --timeout: building
// the problem stops evaluating there, the claim using it is not allocated
// with a reason naming the selector and the time budget, and the other
// claims are allocated.
func TestAllocateTimeoutCoversSelectors(t *testing.T) {
	l := "[" + strings.TrimSuffix(strings.Repeat("1,", 40), ",") + "]"
	expr := "device.attributes['big.example.com'].idx >= 0 && " + l + ".all(x, " + l + ".all(y, " + l + ".all(z, x+y+z > 0)))"
	var sb strings.Builder
	sb.WriteString(strings.Split(hugeCounters(), "  devices:\n")[0] + "  devices:\n")
	for i := 0; i < 200; i++ {
		sb.WriteString("  - name: d" + strconv.Itoa(i) + "\n    attributes: {idx: {int: " + strconv.Itoa(i) + "}}\n")
	}
	sb.WriteString("---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: slow, namespace: default}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly:\n        deviceClassName: big\n        selectors:\n        - cel: {expression: " + strconv.Quote(expr) + "}\n")
	sb.WriteString("---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: quick, namespace: default}\nspec:\n  devices:\n    requests:\n    - name: r\n      exactly: {deviceClassName: big}\n")
	path := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// --timeout covers loading too, which a busy machine (or -race) slows
	// tenfold; give it three times what loading took here, plus 300 ms:
	// still far less than the ~3 s the selector's cost limit takes.
	// (validate only times loading here: it rightly finds the huge
	// counters invalid.)
	start := time.Now()
	_, _, _ = runCLI(t, "validate", "-f", path)
	budget := 3*time.Since(start) + 300*time.Millisecond
	stdout, stderr, err := runCLI(t, "allocate", "-f", path, "--timeout", budget.Round(time.Millisecond).String(), "-o", "table")
	if err != nil {
		t.Fatalf("allocate --timeout %v: %v\n%s", budget, err, stderr)
	}
	var slow, quick string
	for _, l := range strings.Split(stdout, "\n") {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "default/slow":
			slow = l
		case len(f) > 0 && f[0] == "default/quick":
			quick = l
		}
	}
	if !strings.Contains(slow, "not evaluated: the run's time budget (--timeout) ran out") || !strings.Contains(slow, "idx >= 0") {
		t.Errorf("slow claim: %q; want unallocated, naming the selector and the time budget", slow)
	}
	if !strings.Contains(quick, "big.example.com/p/d") {
		t.Errorf("quick claim: %q; want it allocated:\n%s", quick, stdout)
	}
}

// The controller holds claims for forecast demand by default; reconcile
// --once, which has no later pass to decide them in, does not.
func TestHoldDefaults(t *testing.T) {
	for cmd, want := range map[string]string{"controller": "(default: 3m20s)", "reconcile": "(default: 0s)"} {
		stdout, _, err := runApp(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		line := ""
		for _, l := range strings.Split(stdout, "\n") {
			if strings.Contains(l, "--hold ") {
				line = l
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(line), want) {
			t.Errorf("%s --help: --hold line %q, want it to end %q", cmd, line, want)
		}
	}
}

// --hold-idle-per-claim: both commands take it, with hold's default (10 min), and
// refuse a value that is not positive before connecting to any cluster.
func TestHoldIdlePerClaimFlag(t *testing.T) {
	for _, cmd := range []string{"controller", "reconcile"} {
		stdout, _, err := runApp(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		line := ""
		for _, l := range strings.Split(stdout, "\n") {
			if strings.Contains(l, "--hold-idle-per-claim ") {
				line = l
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(line), "(default: 10m0s)") {
			t.Errorf("%s --help: --hold-idle-per-claim line %q, want it to end (default: 10m0s)", cmd, line)
		}
		for _, v := range []string{"0s", "-5s"} {
			_, _, err := runApp(t, cmd, "--hold-idle-per-claim="+v, "--kubeconfig=/nonexistent")
			if err == nil || !strings.Contains(err.Error(), "--hold-idle-per-claim must be positive") {
				t.Errorf("%s --hold-idle-per-claim=%s: error %v, want it refused", cmd, v, err)
			}
		}
	}
}

// --memory-limit takes a quantity of bytes; anything else is refused with
// the flag named.
func TestMemoryLimitFlag(t *testing.T) {
	for s, want := range map[string]int64{"": 0, "1800Mi": 1800 << 20, "2G": 2e9, "0": 0} {
		if got, err := memoryLimit(s); err != nil || got != want {
			t.Errorf("memoryLimit(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"lots", "-1Gi"} {
		if _, err := memoryLimit(s); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
			t.Errorf("memoryLimit(%q): %v; want an error naming the flag", s, err)
		}
	}
}
