package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/urfave/cli/v2"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/check"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

const examplesDir = "../../examples"

// exampleDirs lists every directory under examples/ that holds input files
// (a scenario), relative to examples/.
func exampleDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					rel, err := filepath.Rel(examplesDir, path)
					if err != nil {
						return err
					}
					dirs = append(dirs, filepath.ToSlash(rel))
					return nil
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no example directories found")
	}
	return dirs
}

// runCLI runs `drasat args...` in-process and returns what it wrote to
// stdout and stderr.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	dir := t.TempDir()
	outF, ferr := os.Create(filepath.Join(dir, "stdout"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	errF, ferr := os.Create(filepath.Join(dir, "stderr"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
	app := newApp(append([]string{"drasat"}, args...), outF, errF)
	app.ExitErrHandler = func(*cli.Context, error) {} // never os.Exit in a test
	err = app.RunContext(context.Background(), append([]string{"drasat"}, args...))
	outF.Close()
	errF.Close()
	o, rerr := os.ReadFile(outF.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	e, rerr := os.ReadFile(errF.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	return string(o), string(e), err
}

// TestExamples allocates every shipped example through the CLI, under both
// compatibility-group semantics, and checks the output: every pending claim
// is in it, at least one is allocated, the report agrees, and the
// independent checker finds the allocations feasible.
func TestExamples(t *testing.T) {
	for _, dir := range exampleDirs(t) {
		for _, compat := range []string{model.CompatKEP5963, model.CompatWildcard} {
			t.Run(dir+"/"+compat, func(t *testing.T) {
				path := filepath.Join(examplesDir, filepath.FromSlash(dir))
				report := filepath.Join(t.TempDir(), "report.json")
				stdout, stderr, err := runCLI(t, "allocate", "-f", path, "-o", "json", "--compat", compat, "--report", report)
				if err != nil {
					t.Fatalf("drasat allocate -f %s: %v\nstderr:\n%s", path, err, stderr)
				}
				objs, _, err := input.Load([]string{path}, nil)
				if err != nil {
					t.Fatal(err)
				}
				var list struct {
					Kind  string                       `json:"kind"`
					Items []*resourceapi.ResourceClaim `json:"items"`
				}
				if err := json.Unmarshal([]byte(stdout), &list); err != nil {
					t.Fatalf("output is not a JSON List: %v\n%s", err, stdout)
				}
				if list.Kind != "List" {
					t.Fatalf("output kind %q, want List", list.Kind)
				}
				out := map[string]*resourceapi.ResourceClaim{}
				for _, c := range list.Items {
					out[c.Namespace+"/"+c.Name] = c
				}
				pending, allocated := 0, 0
				for _, c := range objs.Claims {
					if c.Status.Allocation != nil {
						continue
					}
					pending++
					key := c.Namespace + "/" + c.Name
					got, ok := out[key]
					if !ok {
						t.Errorf("pending claim %s is missing from the output", key)
						continue
					}
					if got.Status.Allocation != nil {
						allocated++
					}
				}
				if len(list.Items) != pending {
					t.Errorf("output has %d claims, input has %d pending", len(list.Items), pending)
				}
				if allocated == 0 {
					t.Errorf("no claim allocated\nstderr:\n%s", stderr)
				}

				var rep alloc.Report
				b, err := os.ReadFile(report)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &rep); err != nil {
					t.Fatal(err)
				}
				if rep.Pending != pending || rep.Allocated != allocated || rep.Unallocated != pending-allocated {
					t.Errorf("report says pending %d, allocated %d, unallocated %d; output has %d pending, %d allocated",
						rep.Pending, rep.Allocated, rep.Unallocated, pending, allocated)
				}
				if len(rep.UnallocatedWhy) != pending-allocated {
					t.Errorf("report gives %d reasons for %d unallocated claims", len(rep.UnallocatedWhy), pending-allocated)
				}

				compactOpaque(t, list.Items)
				if err := check.Check(objs, list.Items, check.Options{Compat: compat}); err != nil {
					t.Errorf("allocations are not feasible:\n%v", err)
				}

				if dir == "mig-a100" {
					checkMIGDevices(t, objs, out["default/mig-devices"])
				}
			})
		}
	}
}

// compactOpaque undoes the indentation that -o json adds inside opaque
// config parameters, so the claims' specs compare byte for byte with the
// input (check.Check compares RawExtension bytes, not JSON values).
func compactOpaque(t *testing.T, claims []*resourceapi.ResourceClaim) {
	t.Helper()
	for _, c := range claims {
		for i := range c.Spec.Devices.Config {
			if o := c.Spec.Devices.Config[i].Opaque; o != nil && o.Parameters.Raw != nil {
				var b bytes.Buffer
				if err := json.Compact(&b, o.Parameters.Raw); err != nil {
					t.Fatal(err)
				}
				o.Parameters.Raw = b.Bytes()
			}
		}
	}
}

// checkMIGDevices: the KEP-4815 claim is allocated, one device per request,
// all four MIG devices on the same physical GPU.
func checkMIGDevices(t *testing.T, objs *input.Objects, c *resourceapi.ResourceClaim) {
	t.Helper()
	if c == nil || c.Status.Allocation == nil {
		t.Fatal("claim default/mig-devices is not allocated")
	}
	devices := map[input.DeviceID]*resourceapi.Device{}
	for _, s := range objs.Slices {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			devices[input.DeviceID{Driver: s.Spec.Driver, Pool: s.Spec.Pool.Name, Device: d.Name}] = d
		}
	}
	results := c.Status.Allocation.Devices.Results
	requests := map[string]bool{}
	parents := map[string]bool{}
	for _, r := range results {
		requests[r.Request] = true
		d := devices[input.DeviceID{Driver: r.Driver, Pool: r.Pool, Device: r.Device}]
		if d == nil {
			t.Fatalf("result names unknown device %s/%s/%s", r.Driver, r.Pool, r.Device)
		}
		attr, ok := d.Attributes["parentUUID"]
		if !ok || attr.StringValue == nil {
			t.Fatalf("device %s has no parentUUID", r.Device)
		}
		parents[*attr.StringValue] = true
	}
	if len(results) != 4 || len(requests) != 4 {
		t.Errorf("mig-devices: %d results for %d requests, want 4 of 4", len(results), len(requests))
	}
	if len(parents) != 1 {
		t.Errorf("mig-devices: devices come from %d GPUs, want one (matchAttribute gpu.nvidia.com/parentUUID): %+v", len(parents), results)
	}
}
