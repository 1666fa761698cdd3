package frag

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// TestViewSumsAreFragsOwn: a view's per-shape sums (memo.go) give frag's
// loops to the bit, through random takes and releases on MIG GPUs (free
// shares in eighths: the sums are kept) and on GPUs shared by milli
// (tenths: they are not, and the loops answer).
func TestViewSumsAreFragsOwn(t *testing.T) {
	objs, pMIG := loadA100(t, claim("a", "1g.5gb", 1), claim("b", "2g.10gb", 1), claim("c", "3g.20gb", 1), claim("d", "1g.5gb", 2))
	mMIG, err := workload(claim("w1", "1g.5gb", 1), claim("w2", "3g.20gb", 1), claim("w3", "7g.40gb", 1)).Bind(t.Context(), objs, pMIG)
	if err != nil {
		t.Fatal(err)
	}
	shared := sharedObjects()
	for _, milli := range []int64{100, 200, 300, 700} {
		shared.Claims = append(shared.Claims, sharedClaim(fmt.Sprint("q", milli), milli))
	}
	_, mShared := sharedMeasure(t, shared)
	kept := 0
	for _, m := range []*Measure{mMIG, mShared} {
		p := m.p
		rng := rand.New(rand.NewPCG(1, 2))
		s := model.NewState(p)
		// Views kept current through the takes, as placeOn keeps its view.
		views := map[int]*nodeView{}
		for _, n := range m.nodeOrder() {
			views[n] = m.view(s, n)
		}
		var taken []alloc.Pick
		var claims []*model.Claim
		for step := 0; step < 2000; step++ {
			c := p.Claims[rng.IntN(len(p.Claims))]
			d := -1
			if len(taken) > 0 && rng.IntN(3) == 0 {
				i := len(taken) - 1
				alloc.ReleasePick(s, claims[i], taken[i])
				d = taken[i].Dev
				taken, claims = taken[:i], claims[:i]
			} else {
				a := c.Requests[0].Alternatives[0]
				if cand := a.Candidates[rng.IntN(len(a.Candidates))]; s.FitsFor(cand, a, true) {
					pk := alloc.Pick{Req: 0, Alt: 0, Dev: cand}
					alloc.TakePick(s, c, pk)
					taken, claims = append(taken, pk), append(claims, c)
					d = cand
				}
			}
			for _, n := range m.nodeOrder() {
				v := views[n]
				if d >= 0 {
					m.refreshDevice(s, v, d)
				}
				if v.sums != nil {
					kept++
				}
				if got, want := m.frag(v), m.fragFresh(v); math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("step %d node %d: frag %v, its loops %v", step, n, got, want)
				}
			}
		}
	}
	if kept == 0 {
		t.Fatal("no view kept its sums: the test tests nothing")
	}
}
