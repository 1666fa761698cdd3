package bound_test

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/tools/scalegen"
)

// TestPodGroupsMoveTogether: on batches of the independent generator
// where one pod in eight uses two claims, the per-node model's answers
// (the global dive spread node by node, as the engine does where pods'
// resources bind) realise every such pod whole: both claims on one node,
// or neither. Without the pod groups as classes (podgroups.go) the
// spread places the two apart or one alone.
func TestPodGroupsMoveTogether(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		objs := scalegen.Generate(scalegen.Config{Nodes: 4, GPUs: 8, Claims: 150, Seed: seed})
		scalegen.AddPods(objs, 48, seed)
		p, na := perNodeModel(t, objs)
		pairs := 0
		for _, g := range p.PodGroups {
			if len(g.Claims) > 1 {
				pairs++
			}
		}
		if pairs == 0 {
			t.Fatal("no pod of two claims generated")
		}
		g := na.Global()
		sol, _, err := g.Dive(context.Background(), time.Now().Add(time.Minute), 1)
		if err != nil || sol.Values == nil {
			t.Fatalf("global dive: %v", err)
		}
		vals, w := na.DistributeByNode(context.Background(), time.Now().Add(time.Minute), g, sol.Values, sol.Bound, nil)
		checkPerNode(t, na, vals, w)
		re, err := na.Realise(vals, p.Claims)
		if err != nil {
			t.Fatal(err)
		}
		if len(re.Nodes) != int(w) {
			t.Errorf("seed %d: %d claims realised, the answer weighs %d", seed, len(re.Nodes), w)
		}
		whole := 0
		for _, pg := range p.PodGroups {
			if len(pg.Claims) < 2 {
				continue
			}
			n0, in0 := re.Nodes[pg.Claims[0]]
			for _, c := range pg.Claims[1:] {
				if n, in := re.Nodes[c]; in != in0 || in && n != n0 {
					t.Errorf("seed %d: pod group %d split: claim %d on node %d (%v), claim %d on %d (%v)", seed, pg.Index, pg.Claims[0], n0, in0, c, n, in)
				}
			}
			if in0 {
				whole++
			}
		}
		t.Logf("seed %d: %d of %d pods of two claims admitted whole, %d claims of bound %d", seed, whole, pairs, w, sol.Bound)
	}
}
