package k8s

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/frag"
	"github.com/drasat/drasat/model"
)

// A pass builds the frag look-ahead's workload shapes with its batch
// (frag.BindBuilt) instead of in a build of their own (frag.For): the
// problem without the shapes is the one built without them, and the
// measure ranks placements as For's does, so the pass allocates the same.
func TestShapesBuiltWithBatchAsFor(t *testing.T) {
	ctx := context.Background()
	snap, batch := passInput(t, 8, 40)
	objs := objects(snap, batch)
	w := frag.WorkloadFor(objs, nil)
	shapes := w.ShapeClaims()
	if len(shapes) < 2 {
		t.Fatalf("%d shapes; want several to compare", len(shapes))
	}
	memo := model.NewMemo()
	opts := model.Options{Memo: memo}

	alone, err := model.Build(ctx, objs, opts)
	if err != nil {
		t.Fatal(err)
	}
	forM, err := frag.For(ctx, objs, alone, nil)
	if err != nil {
		t.Fatal(err)
	}

	with := *objs
	with.Claims = append(slices.Clip(objs.Claims), shapes...)
	p, built, err := buildWithShapes(ctx, &with, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(built) != len(shapes) {
		t.Fatalf("split off %d claims; want the %d shapes", len(built), len(shapes))
	}
	if !reflect.DeepEqual(candidateValues(p.Claims), candidateValues(alone.Claims)) {
		t.Fatal("the batch's claims built with the shapes differ from those built alone")
	}
	builtM := w.BindBuilt(&with, p, built)

	fa, ga := forM.Frag(model.NewState(alone))
	fb, gb := builtM.Frag(model.NewState(p))
	if fa != fb || ga != gb {
		t.Fatalf("fragmentation %v of %v free GPUs; For's %v of %v", fb, gb, fa, ga)
	}
	// BindBuilt kept them for the cluster: a measure bound on another build
	// of it (a pass's pods without claims) builds no shapes and is For's.
	keptM, err := frag.For(ctx, objs, alone, w)
	if err != nil {
		t.Fatal(err)
	}
	if n := w.ShapeBuilds(); n != 0 {
		t.Fatalf("Bind after BindBuilt on the same cluster built the shapes %d times; want none", n)
	}
	if fc, gc := keptM.Frag(model.NewState(alone)); fa != fc || ga != gc {
		t.Fatalf("fragmentation %v of %v free GPUs with the kept shapes; For's %v of %v", fc, gc, fa, ga)
	}
	run := func(p *model.Problem, m *frag.Measure) string {
		res, err := alloc.Run(ctx, p, alloc.Options{Policy: alloc.Frag, Lookahead: m, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprintf("admitted %d, optimal %v:", len(res.Assignments), res.Stats.Optimal)
		for _, a := range res.Assignments {
			out += fmt.Sprintf(" %s@%d%v", a.Claim.Key, a.Node, a.Picks)
		}
		return out
	}
	if raceDetector {
		// The look-ahead stops at MaxLookahead: under the race detector it
		// stops at a point that depends on the machine's speed, so two
		// runs of the same measure may place differently (seen once in
		// CI). The measures are compared above.
		return
	}
	if a, b := run(alone, forM), run(p, builtM); a != b {
		t.Fatalf("allocated with the shapes built with the batch:\n%s\nwith frag.For's:\n%s", b, a)
	}
}

// candidateValues is cs with each constraint's value table (shared by the
// problem's constraints on the attribute, so it holds what other claims
// looked up too) cut down to the candidates of the alternatives the
// constraint applies to, which is what the claim reads of it.
func candidateValues(cs []*model.Claim) []model.Claim {
	out := make([]model.Claim, len(cs))
	for i, c := range cs {
		out[i] = *c
		out[i].Constraints = nil
		for _, k := range c.Constraints {
			kc := *k
			kc.Values = make(model.AttributeValues, len(k.Values))
			for _, r := range c.Requests {
				for _, a := range r.Alternatives {
					if k.Applies(r, a) {
						for _, d := range a.Candidates {
							kc.Values[d] = k.Values[d]
						}
					}
				}
			}
			out[i].Constraints = append(out[i].Constraints, &kc)
		}
	}
	return out
}
