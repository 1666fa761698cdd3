// Package conformance runs the test table of the kube-scheduler's structured
// allocator (TestAllocator in k8s.io/dynamic-resource-allocation's
// structured/internal/allocatortesting) against drasat. The cases are
// upstream's, extracted at test time from the module version in go.mod: see
// Extract. Nothing of upstream's code is kept in this repository.
package conformance

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Module is the upstream module whose allocator table is extracted.
const Module = "k8s.io/dynamic-resource-allocation"

// The files added to the scratch copy. export.go replaces RunTestAllocator
// (the runner TestAllocator hands its table to) with one that still runs
// upstream's own assertions on every case and then writes the cases as JSON;
// extract_test.go calls TestAllocator with the experimental allocator, the
// implementation that supports every feature.
//
//go:embed inject/export.go.txt inject/extract_test.go.txt
var inject embed.FS

const (
	testingDir = "structured/internal/allocatortesting"
	testingGo  = testingDir + "/allocator_testing.go"
	runnerFunc = "func RunTestAllocator("
	experiment = "structured/internal/experimental"
)

// Outcome is what the upstream allocator returned for a case.
type Outcome struct {
	Error   string                         `json:"error,omitempty"`
	Results []resourceapi.AllocationResult `json:"results,omitempty"`
}

// Kind is "error", "all" (every claim allocated) or "none".
func (o Outcome) Kind() string {
	switch {
	case o.Error != "":
		return "error"
	case len(o.Results) > 0:
		return "all"
	}
	return "none"
}

// Case is one entry of upstream's table, with the allocator's outcome.
type Case struct {
	Name     string                       `json:"name"`
	Features []string                     `json:"features"`
	Node     *corev1.Node                 `json:"node"`
	Classes  []*resourceapi.DeviceClass   `json:"classes"`
	Slices   []*resourceapi.ResourceSlice `json:"slices"`
	Claims   []*resourceapi.ResourceClaim `json:"claims"`
	// AllocatedDevices are "driver/pool/device" in use before the run;
	// AllocatedSharedDeviceIDs ("driver/pool/device/shareID") and
	// AllocatedCapacity (device to capacity name to quantity) are the
	// consumable-capacity part of the allocated state.
	AllocatedDevices         []string                     `json:"allocatedDevices,omitempty"`
	AllocatedSharedDeviceIDs []string                     `json:"allocatedSharedDeviceIDs,omitempty"`
	AllocatedCapacity        map[string]map[string]string `json:"allocatedCapacity,omitempty"`
	// TableHolds: upstream's own assertions passed on this case.
	TableHolds bool `json:"tableHolds"`
	// Upstream ran with the case's features, UpstreamAllFeatures with every
	// feature on (as drasat always is).
	Upstream            Outcome `json:"upstream"`
	UpstreamAllFeatures Outcome `json:"upstreamAllFeatures"`
}

// Source tells which module version the cases came from.
type Source struct {
	Version string
	Dir     string
}

// Locate asks the go command for the module version that go.mod in root
// selects, and where its source is in the module cache.
func Locate(root string) (Source, error) {
	cmd := exec.Command("go", "list", "-m", "-json", Module)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Source{}, fmt.Errorf("go list -m %s: %w", Module, err)
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return Source{}, fmt.Errorf("go list -m %s: %w", Module, err)
	}
	if m.Dir == "" {
		return Source{}, fmt.Errorf("%s@%s is not in the module cache (go mod download %s)", Module, m.Version, Module)
	}
	return Source{Version: m.Version, Dir: m.Dir}, nil
}

// Extract returns the cases of src's TestAllocator table. The result is kept
// in cacheDir, keyed by the module version and the injected files, so that
// only the first run pays for building upstream's test.
func Extract(src Source, cacheDir string, log func(string)) ([]Case, error) {
	h := sha256.New()
	h.Write([]byte(src.Version))
	for _, name := range []string{"inject/export.go.txt", "inject/extract_test.go.txt"} {
		b, _ := inject.ReadFile(name)
		h.Write(b)
	}
	cached := filepath.Join(cacheDir, fmt.Sprintf("allocator-%s-%s.json", src.Version, hex.EncodeToString(h.Sum(nil))[:12]))
	if b, err := os.ReadFile(cached); err == nil {
		var cases []Case
		if err := json.Unmarshal(b, &cases); err == nil {
			return cases, nil
		}
	}
	log(fmt.Sprintf("extracting the allocator table of %s@%s (builds upstream's test once; cached in %s)", Module, src.Version, cacheDir))
	b, err := extract(src)
	if err != nil {
		return nil, err
	}
	var cases []Case
	if err := json.Unmarshal(b, &cases); err != nil {
		return nil, fmt.Errorf("reading the extracted cases: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err == nil {
		tmp := cached + ".tmp"
		if os.WriteFile(tmp, b, 0o644) == nil {
			_ = os.Rename(tmp, cached)
		}
	}
	return cases, nil
}

func extract(src Source) ([]byte, error) {
	scratch, err := os.MkdirTemp("", "drasat-conformance-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	mod := filepath.Join(scratch, "module")
	// The module cache is read-only; the copy is writable (os.CopyFS).
	if err := os.CopyFS(mod, os.DirFS(src.Dir)); err != nil {
		return nil, fmt.Errorf("copying %s: %w", src.Dir, err)
	}
	orig, err := os.ReadFile(filepath.Join(mod, testingGo))
	if err != nil {
		return nil, fmt.Errorf("%s@%s: %w", Module, src.Version, err)
	}
	if bytes.Count(orig, []byte("\n"+runnerFunc)) != 1 {
		return nil, fmt.Errorf("%s@%s: %s no longer declares %s...) once: the extraction needs updating", Module, src.Version, testingGo, runnerFunc)
	}
	patched := bytes.Replace(orig, []byte("\n"+runnerFunc), []byte("\nfunc upstreamRunTestAllocator("), 1)
	if err := os.WriteFile(filepath.Join(mod, testingGo), patched, 0o644); err != nil {
		return nil, err
	}
	for from, to := range map[string]string{
		"inject/export.go.txt":       filepath.Join(mod, testingDir, "zz_drasat_export.go"),
		"inject/extract_test.go.txt": filepath.Join(mod, experiment, "zz_drasat_extract_test.go"),
	} {
		b, _ := inject.ReadFile(from)
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return nil, err
		}
	}
	out := filepath.Join(scratch, "cases.json")
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestDrasatExtract$", "./"+experiment+"/")
	cmd.Dir = mod
	// The copy is its own module: its go.mod and go.sum decide the
	// dependencies (its test needs gomega, fetched through the module proxy
	// on first use).
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "DRASAT_CONFORMANCE_OUT="+out)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	// A case that fails upstream's own assertions fails the go test but is
	// still written (TableHolds false): the suite reports it by name.
	runErr := cmd.Run()
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("upstream's TestAllocator (%s@%s) wrote no cases: %v\n%s", Module, src.Version, runErr, tail(log.String(), 60))
	}
	return b, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
