package bench

import (
	"github.com/drasat/drasat/bench/gen"
	"reflect"
	"strings"
	"testing"
)

// mixCounts describes a generated mig instance's claims and running
// allocations.
type mixCounts struct {
	pending, whole, twoGPU, count, multi, match int
	// runningPerGPU: running MIG devices per GPU that has any; large: running
	// devices of more than two memory slices.
	runningPerGPU map[string]int
	large         int
}

func countMix(t *testing.T, family string, mix map[string]float64, sz Size, seed uint64) mixCounts {
	t.Helper()
	insts, err := Generate("mig", sz, seed, GenerateOptions{MIGFamily: family, MIGMix: mix})
	if err != nil {
		t.Fatal(err)
	}
	m := mixCounts{runningPerGPU: map[string]int{}}
	for _, c := range insts[0].Objs.Claims {
		reqs := c.Spec.Devices.Requests
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				gpu := r.Pool + "/" + strings.SplitN(r.Device, "-mig-", 2)[0]
				m.runningPerGPU[gpu]++
				if !strings.Contains(r.Device, "-mig-1g") {
					m.large++
				}
			}
			continue
		}
		m.pending++
		switch {
		case reqs[0].Exactly.DeviceClassName == "gpu.nvidia.com" && reqs[0].Exactly.Count == 1:
			m.whole++
		case reqs[0].Exactly.DeviceClassName == "gpu.nvidia.com" && reqs[0].Exactly.Count == 2:
			m.twoGPU++
		case len(reqs) == 1 && reqs[0].Exactly.Count > 1:
			m.count++
		case len(reqs) > 1:
			m.multi++
			if len(c.Spec.Devices.Constraints) > 0 {
				m.match++
			}
		}
	}
	return m
}

// TestMIGFamilies: each claim mix generates what it says.
func TestMIGFamilies(t *testing.T) {
	sz := Size{Nodes: 8, GPUs: 8, Claims: 600}
	def := countMix(t, "default", nil, sz, 1)
	if def.whole+def.twoGPU+def.count != 0 || def.multi < 90 || def.multi > 150 {
		t.Errorf("default: %+v", def)
	}
	ind := countMix(t, "independent", nil, sz, 1)
	if ind.whole < 20 || ind.twoGPU < 10 || ind.multi < 150 || float64(ind.match) < 0.7*float64(ind.multi) || ind.large != 0 {
		t.Errorf("independent: %+v", ind)
	}
	most := 0
	for _, n := range ind.runningPerGPU {
		most = max(most, n)
	}
	if most != 3 {
		t.Errorf("independent: at most %d running devices on a GPU, want 3", most)
	}
	if s := countMix(t, "simple", nil, sz, 1); s.multi+s.whole+s.twoGPU+s.count != 0 {
		t.Errorf("simple: %+v", s)
	}
	if w := countMix(t, "whole", nil, sz, 1); w.whole < 60 || w.twoGPU < 40 {
		t.Errorf("whole: %+v", w)
	}
	if c := countMix(t, "count", nil, sz, 1); c.count < 110 {
		t.Errorf("count: %+v", c)
	}
	if d := countMix(t, "dense", nil, sz, 1); len(d.runningPerGPU) < 30 || d.large != 0 {
		t.Errorf("dense: %d of 64 GPUs with running devices, %d large", len(d.runningPerGPU), d.large)
	}
	// --mig-mix settings: no multi-device claim on one GPU, none at all.
	if m := countMix(t, "default", map[string]float64{"match": 0}, sz, 1); m.match != 0 || m.multi == 0 {
		t.Errorf("match=0: %+v", m)
	}
	if m := countMix(t, "default", map[string]float64{"multi": 0, "prealloc": 0}, sz, 1); m.multi != 0 || len(m.runningPerGPU) != 0 {
		t.Errorf("multi=0,prealloc=0: %+v", m)
	}
}

// TestMIGDefaultFamilyUnchanged: the default family is DefaultMIG, so the
// instances of earlier measurements stay the same; naming it changes
// nothing.
func TestMIGDefaultFamilyUnchanged(t *testing.T) {
	sz := Size{Nodes: 3, GPUs: 4, Claims: 80}
	for _, fam := range []string{"", "default"} {
		insts, err := Generate("mig", sz, 5, GenerateOptions{MIGFamily: fam})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(insts[0].Objs, gen.MIG(gen.DefaultMIG(3, 4, 80, 5))) {
			t.Fatalf("family %q differs from MIG(DefaultMIG(...))", fam)
		}
		if n := insts[0].Name(); n != "mig 3x4:80" {
			t.Errorf("name %q", n)
		}
	}
	insts, err := Generate("mig", sz, 5, GenerateOptions{MIGFamily: "independent", MIGMix: map[string]float64{"whole": 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if n := insts[0].Name(); n != "mig 3x4:80 independent+whole=0.1" {
		t.Errorf("name %q", n)
	}
}

func TestMIGMixErrors(t *testing.T) {
	for _, bad := range []string{"multi", "nope=1", "multi=2", "prealloc-max=0", "prealloc-max=1.5", "whole=x"} {
		if _, err := gen.ParseMIGMix(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	mix, err := gen.ParseMIGMix("whole=0.6,count=0.5")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Generate("mig", Size{Nodes: 1, GPUs: 1, Claims: 1}, 1, GenerateOptions{MIGMix: mix}); err == nil {
		t.Error("shares above one: no error")
	}
	if _, err := Generate("mig", Size{Nodes: 1, GPUs: 1, Claims: 1}, 1, GenerateOptions{MIGFamily: "weird"}); err == nil {
		t.Error("unknown family: no error")
	}
}
