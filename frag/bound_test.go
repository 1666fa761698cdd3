package frag

import (
	"context"
	"reflect"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// Bind keeps the workload's claim specs built against the cluster while its
// slices, classes and nodes are the same objects, builds them again when
// one changes and builds a new spec alone; the measure is always the one a workload
// that never bound before gives (shapes that differ only in their pod's
// requests share their spec's claim). The specs resolved against a
// problem's devices are kept too, and must not serve a problem of other
// devices built beside the same cluster.
func TestBindKeepsShapes(t *testing.T) {
	type task struct {
		c   *resourceapi.ResourceClaim
		cpu int64
	}
	seen := []task{{claim("a", "1g.5gb", 1), 1}, {claim("b", "full", 1), 2}, {claim("c", "1g.5gb", 1), 4}, {nil, 1}}
	observe := func(w *Workload, ts []task) {
		for _, x := range ts {
			w.ObserveTask(x.c, cpus(x.cpu))
		}
	}
	kept := NewWorkload()
	observe(kept, seen)
	var checkOn func(what string, objs, built *input.Objects, wantRebuilt bool)
	check := func(what string, objs *input.Objects, wantRebuilt bool) {
		t.Helper()
		checkOn(what, objs, objs, wantRebuilt)
	}
	checkOn = func(what string, objs, built *input.Objects, wantRebuilt bool) {
		t.Helper()
		p, err := model.Build(context.Background(), built, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		before := kept.shapeBuilds
		m, err := kept.Bind(context.Background(), objs, p)
		if err != nil {
			t.Fatal(err)
		}
		if rebuilt := kept.shapeBuilds != before; rebuilt != wantRebuilt {
			t.Fatalf("%s: specs built: %v, want %v", what, rebuilt, wantRebuilt)
		}
		fresh := NewWorkload()
		observe(fresh, seen)
		want, err := fresh.Bind(context.Background(), objs, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.shapes) < kept.Shapes() || !reflect.DeepEqual(m.shapes, want.shapes) {
			t.Fatalf("%s: %d shapes measured, differing from a fresh workload's %d", what, len(m.shapes), len(want.shapes))
		}
	}
	objs, _ := loadA100(t)
	check("first", objs, true)
	check("the same cluster", objs, false)
	// Running claims are not part of the specs' problem.
	withClaim := *objs
	withClaim.Claims = []*resourceapi.ResourceClaim{claim("x", "full", 1)}
	withClaim.Slices = slices.Clone(objs.Slices) // another list, the same objects
	check("a pending claim", &withClaim, false)
	// A slice updated is a new object (here without a change).
	updated := *objs
	updated.Slices = slices.Clone(objs.Slices)
	updated.Slices[0] = objs.Slices[0].DeepCopy()
	check("a slice updated", &updated, true)
	check("the updated cluster again", &updated, false)
	// A node relabelled.
	relabelled := updated
	relabelled.Nodes = slices.Clone(updated.Nodes)
	relabelled.Nodes[0] = updated.Nodes[0].DeepCopy()
	relabelled.Nodes[0].Labels = map[string]string{"x": "y"}
	check("a node relabelled", &relabelled, true)
	// A slice gone: the specs' candidates change.
	fewer := relabelled
	fewer.Slices = relabelled.Slices[1:]
	check("a slice gone", &fewer, true)
	// The kept specs, on a problem of other devices: its first slice's
	// devices gone, so every other device has another index.
	check("the cluster again", &relabelled, true)
	checkOn("the same specs on fewer devices", &relabelled, &fewer, false)
	checkOn("and on all of them again", &relabelled, &relabelled, false)
	check("back to fewer", &fewer, true)
	// A new spec; then an old spec with a new pod.
	seen = append(seen, task{claim("d", "2g.10gb", 1), 1})
	observe(kept, seen[len(seen)-1:])
	check("a new spec", &fewer, true)
	seen = append(seen, task{claim("e", "full", 1), 8})
	observe(kept, seen[len(seen)-1:])
	check("a known spec with another pod", &fewer, false)
}
