package model

import (
	"context"
	"testing"

	"github.com/drasat/drasat/input"
)

func loadExample(t *testing.T, dir string) *Problem {
	t.Helper()
	objs, _, err := input.Load([]string{"../examples/" + dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(context.Background(), objs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fingerprints(s *State) []uint64 {
	out := make([]uint64, len(s.P.Nodes)+1)
	for n := -1; n < len(s.P.Nodes); n++ {
		out[n+1] = s.NodeFingerprint(n)
	}
	return out
}

// TestNodeFingerprints: taking a device changes the fingerprint of the
// node it is local to and of no other (of every node, for a device on
// several nodes); releasing it restores them; and the order of takes does
// not matter.
func TestNodeFingerprints(t *testing.T) {
	for _, dir := range []string{"mig-a100", "tpu-multihost"} {
		p := loadExample(t, dir)
		s := NewState(p)
		start := fingerprints(s)
		var free []int
		for d := range p.Devices {
			if !s.Fits(d, true) {
				continue
			}
			free = append(free, d)
			s.Take(d, true)
			after := fingerprints(s)
			local := s.change[d]
			for i := range after {
				n := i - 1
				changed := after[i] != start[i]
				if want := local < 0 || int(local) == n; changed != want {
					t.Errorf("%s: taking %s (local to node %d) changed node %d: %v", dir, p.Devices[d].ID.Device, local, n, changed)
				}
			}
			s.Release(d, true)
			if got := fingerprints(s); !equal(got, start) {
				t.Fatalf("%s: releasing %s did not restore the fingerprints", dir, p.Devices[d].ID.Device)
			}
		}
		if len(free) < 2 {
			t.Fatalf("%s: %d free devices: the case tests nothing", dir, len(free))
		}
		a, b := free[0], free[len(free)-1]
		s1, s2 := NewState(p), NewState(p)
		s1.Take(a, true)
		s1.Take(b, true)
		s2.Take(b, true)
		s2.Take(a, true)
		if !equal(fingerprints(s1), fingerprints(s2)) {
			t.Errorf("%s: the order of two takes changed the fingerprints", dir)
		}
	}
}

func equal(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestTPUDevicesAreNotLocal: a multi-host slice reaches several nodes, so
// its takes are not local to one.
func TestTPUDevicesAreNotLocal(t *testing.T) {
	p := loadExample(t, "tpu-multihost")
	s := NewState(p)
	multi := 0
	for d, dev := range p.Devices {
		if len(dev.Reach) > 1 || dev.All {
			multi++
			if s.change[d] >= 0 {
				t.Errorf("%s reaches %d nodes but is local to node %d", dev.ID.Device, len(dev.Reach), s.change[d])
			}
		}
	}
	if multi == 0 {
		t.Fatal("no multi-host device: the case tests nothing")
	}
}

// TestPodsInNodeFingerprints: placing a pod's claim on a node changes
// that node's fingerprint (its CPU and memory left) and no other's;
// taking it back restores it.
func TestPodsInNodeFingerprints(t *testing.T) {
	p := loadExample(t, "pods-cpu")
	s := NewState(p)
	tried := 0
	for _, c := range p.Claims {
		if !p.Pinning(c) {
			continue
		}
		for n := range p.Nodes {
			start := fingerprints(s)
			s.PlacePod(c, n)
			after := fingerprints(s)
			for i := range after {
				if changed := after[i] != start[i]; changed != (i-1 == n) {
					t.Errorf("placing %s's pod on node %d changed node %d: %v", c.Key, n, i-1, changed)
				}
			}
			s.UnplacePod(c, n)
			if !equal(fingerprints(s), start) {
				t.Fatalf("taking %s's pod back from node %d did not restore the fingerprints", c.Key, n)
			}
			tried++
		}
	}
	if tried == 0 {
		t.Fatal("no pod pins its claims in pods-cpu: the case tests nothing")
	}
}
