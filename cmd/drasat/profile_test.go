package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// --cpuprofile and --memprofile write pprof files (gzip-compressed
// protocol buffers); the report states the reading time apart from the
// build, which --timeout counts.
func TestAllocateProfilesAndReadTime(t *testing.T) {
	dir := t.TempDir()
	cpu, mem, report := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof"), filepath.Join(dir, "r.json")
	if _, stderr, err := runCLI(t, "allocate", "-f", filepath.Join(examplesDir, "mig-a100"), "--cpuprofile", cpu, "--memprofile", mem, "--report", report); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, f := range []string{cpu, mem} {
		b, err := os.ReadFile(f)
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: not a pprof profile (err %v, %d bytes)", f, err, len(b))
		}
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Read  *float64 `json:"readSeconds"`
		Build *float64 `json:"buildSeconds"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Read == nil || r.Build == nil || *r.Read <= 0 || *r.Build <= 0 {
		t.Fatalf("report: readSeconds %v, buildSeconds %v; want both, positive", r.Read, r.Build)
	}
	if _, _, err := runCLI(t, "allocate", "-f", filepath.Join(examplesDir, "mig-a100"), "--cpuprofile", filepath.Join(dir, "no", "such", "dir")); err == nil {
		t.Fatal("a CPU profile that cannot be written is no error")
	}
}
