package gen

import (
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/drasat/drasat/input"
)

// lgipRow is one profile as `nvidia-smi mig -lgip` lists it: instances,
// memory in GiB (two decimals, as printed), SMs, decoders, copy engines,
// JPEG and OFA engines.
type lgipRow struct {
	name                     string
	instances                int
	memGiB                   float64
	sm, dec, ce, jpeg, ofa   int64
	memorySlices, placements int
}

// TestMIGModelsMatchNvidiaSMI compares the profile tables with what
// nvidia-smi reports on an A100-SXM4-40GB and an H100 80GB.
func TestMIGModelsMatchNvidiaSMI(t *testing.T) {
	for _, tc := range []struct {
		gm   *GPUModel
		arch string
		rows []lgipRow
	}{
		{&A100, "Ampere", []lgipRow{
			{"1g.5gb", 7, 4.75, 14, 0, 1, 0, 0, 1, 7},
			{"1g.5gb+me", 1, 4.75, 14, 1, 1, 1, 1, 1, 7},
			{"1g.10gb", 4, 9.62, 14, 1, 1, 0, 0, 2, 4},
			{"2g.10gb", 3, 9.62, 28, 1, 2, 0, 0, 2, 3},
			{"3g.20gb", 2, 19.50, 42, 2, 3, 0, 0, 4, 2},
			{"4g.20gb", 1, 19.50, 56, 2, 4, 0, 0, 4, 1},
			{"7g.40gb", 1, 39.25, 98, 5, 7, 1, 1, 8, 1},
		}},
		{&H100, "Hopper", []lgipRow{
			{"1g.10gb", 7, 9.75, 16, 1, 1, 1, 0, 1, 7},
			{"1g.10gb+me", 1, 9.75, 16, 1, 1, 1, 1, 1, 7},
			{"1g.20gb", 4, 19.62, 26, 1, 1, 1, 0, 2, 4},
			{"2g.20gb", 3, 19.62, 32, 2, 2, 2, 0, 2, 3},
			{"3g.40gb", 2, 39.50, 60, 3, 3, 3, 0, 4, 2},
			{"4g.40gb", 1, 39.50, 64, 4, 4, 4, 0, 4, 1},
			{"7g.80gb", 1, 79.25, 132, 7, 8, 7, 1, 8, 1},
		}},
	} {
		gm := tc.gm
		if gm.Architecture != tc.arch {
			t.Errorf("%s: architecture %q, want %q", gm.Name, gm.Architecture, tc.arch)
		}
		if len(gm.Profiles) != len(tc.rows) {
			t.Fatalf("%s: %d profiles, want %d", gm.Name, len(gm.Profiles), len(tc.rows))
		}
		full := tc.rows[len(tc.rows)-1]
		if gm.SMs != full.sm || gm.Decoders != full.dec || gm.CopyEng != full.ce || gm.JPEG != full.jpeg || gm.OFA != full.ofa {
			t.Errorf("%s: GPU counters SM %d DEC %d CE %d JPEG %d OFA %d, want the 7g profile's %+v", gm.Name, gm.SMs, gm.Decoders, gm.CopyEng, gm.JPEG, gm.OFA, full)
		}
		for i, want := range tc.rows {
			p := gm.Profiles[i]
			gib := float64(p.MemoryMi) / 1024
			if p.Name != want.name || p.SMs != want.sm || p.Decoders != want.dec || p.CopyEng != want.ce || p.JPEG != want.jpeg || p.OFA != want.ofa ||
				p.Slices != want.memorySlices || len(p.Starts) != want.placements || math.Abs(gib-want.memGiB) >= 0.01 {
				t.Errorf("%s %s: %+v (%.3f GiB), want %+v", gm.Name, p.Name, p, gib, want)
			}
			// The instances nvidia-smi allows on an empty GPU are what
			// the counters and the memory slices allow.
			n := 0
			var used [8]bool
			var eng engineUse
			for _, s := range p.Starts {
				free := eng.plus(p, 1).fits(gm)
				for k := s; k < s+p.Slices; k++ {
					free = free && !used[k]
				}
				if free {
					n++
					eng = eng.plus(p, 1)
					for k := s; k < s+p.Slices; k++ {
						used[k] = true
					}
				}
			}
			if n != want.instances {
				t.Errorf("%s %s: %d instances fit on one GPU, nvidia-smi allows %d", gm.Name, p.Name, n, want.instances)
			}
		}
	}
}

// TestMIGDeviceNames: MIG devices are named as the NVIDIA driver names
// them (gpu-0-mig-1g5gb-me-20-3), the profile attribute keeps the
// profile's real name, and the per-GPU pictures label placements with it.
func TestMIGDeviceNames(t *testing.T) {
	for _, tc := range []struct {
		gm      *GPUModel
		profile string
		want    string
	}{{&A100, "1g.5gb", "gpu-0-mig-1g5gb-19-0"}, {&A100, "1g.5gb+me", "gpu-0-mig-1g5gb-me-20-0"}, {&H100, "7g.80gb", "gpu-0-mig-7g80gb-0-0"}} {
		pr := tc.gm.Profile(tc.profile)
		if got := migName(0, *pr, 0); got != tc.want {
			t.Errorf("migName(0, %q, 0) = %q, want %q", tc.profile, got, tc.want)
		}
	}
	// The generator's devices of one A100 node with two GPUs are named as
	// those of the shipped example.
	ex, _, err := input.Load([]string{filepath.Join("..", "..", "examples", "mig-a100", "20-slices.yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(objs *input.Objects, pool string) (out []string) {
		for _, s := range objs.Slices {
			if s.Spec.Pool.Name != pool {
				continue
			}
			for _, d := range s.Spec.Devices {
				out = append(out, d.Name)
			}
		}
		sort.Strings(out)
		return out
	}
	want := names(ex, "node-1")
	got := names(MIG(MIGConfig{Nodes: 1, GPUsPerNode: 2, Seed: 1}), "node-000")
	if len(want) != 2*26 || !reflect.DeepEqual(got, want) {
		t.Errorf("device names of a 2-GPU A100 node:\n got  %v\n want %v (examples/mig-a100 node-1)", got, want)
	}
}
