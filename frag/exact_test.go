package frag

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/model"
)

// leastFragByBruteForce tries every placement of the claims (every node,
// every set of devices) and returns the least fragmentation of a
// placement that admits them all (+Inf when none does).
func leastFragByBruteForce(m *Measure, p *model.Problem) float64 {
	s := model.NewState(p)
	best := math.Inf(1)
	var place func(i int)
	place = func(i int) {
		if i == len(p.Claims) {
			best = min(best, frag(m, s))
			return
		}
		c := p.Claims[i]
		a := c.Requests[0].Alternatives[0]
		for _, n := range c.CandidateNodes(p) {
			cands := a.CandidatesOn(n)
			var pick func(k, from int)
			pick = func(k, from int) {
				if k == a.Count {
					place(i + 1)
					return
				}
				for j := from; j < len(cands); j++ {
					if d := cands[j]; s.Fits(d, true) {
						s.Take(d, true)
						pick(k+1, j+1)
						s.Release(d, true)
					}
				}
			}
			pick(0, 0)
		}
	}
	place(0)
	return best
}

func frag(m *Measure, s *model.State) float64 {
	f, _ := m.Frag(s)
	return f
}

var exactProfiles = []string{"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "full"}

func randomClaim(r *rand.Rand, name string) *resourceapi.ResourceClaim {
	pr := exactProfiles[r.Intn(len(exactProfiles))]
	count := 1
	if r.Intn(4) == 0 {
		count = 2
	}
	return claim(name, pr, count)
}

// randomBatch is two to four random MIG claims on the A100 fixture, and
// the measure of a random workload of one to four shapes.
func randomBatch(t *testing.T, r *rand.Rand) (*model.Problem, *Measure) {
	t.Helper()
	var cs, ws []*resourceapi.ResourceClaim
	for i := range 2 + r.Intn(3) {
		cs = append(cs, randomClaim(r, fmt.Sprintf("c%d", i)))
	}
	for i := range 1 + r.Intn(4) {
		ws = append(ws, randomClaim(r, fmt.Sprintf("w%d", i)))
	}
	objs, p := loadA100(t, cs...)
	m, err := workload(ws...).Bind(context.Background(), objs, p)
	if err != nil {
		t.Fatal(err)
	}
	return p, m
}

// The exact level against brute force: random batches of up to four MIG
// claims on two nodes of two A100s, random workloads with one- and
// two-device shapes. Its placement must admit every claim, be valid, and
// be exactly as fragmented as the least fragmented of all placements.
func TestExactAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	tried, multi := 0, 0
	for seed := 0; tried < 60; seed++ {
		p, m := randomBatch(t, r)
		want := leastFragByBruteForce(m, p)
		if math.IsInf(want, 1) {
			continue // the batch does not fit whole
		}
		tried++
		e := m.newExact(p.Claims, budget{context.Background(), time.Now().Add(time.Minute)})
		if e == nil {
			t.Fatalf("seed %d: the exact level does not apply to MIG claims", seed)
		}
		if len(e.multi) > 0 {
			multi++
		}
		as, _, ok := e.place()
		if !ok {
			t.Fatalf("seed %d: no placement, brute force has one of frag %v", seed, want)
		}
		if len(as) != len(p.Claims) {
			t.Fatalf("seed %d: %d claims placed, want %d", seed, len(as), len(p.Claims))
		}
		s := model.NewState(p)
		for _, a := range as {
			for _, pk := range a.Picks {
				if !alloc.FitsPick(s, a.Claim, pk) {
					t.Fatalf("seed %d: %s does not fit", seed, p.Devices[pk.Dev].ID)
				}
				alloc.TakePick(s, a.Claim, pk)
			}
		}
		if got := frag(m, s); !near(got, want) {
			t.Fatalf("seed %d: exact frag %v, brute force %v", seed, got, want)
		}
	}
	if multi == 0 {
		t.Fatal("no workload had a multi-device shape: the guesses went untested")
	}
}

// Through the engine: the frag policy's result on batches that fit whole
// is proven least fragmented (Stats.FragExact) and is as fragmented as the
// brute force's least, with every claim admitted.
func TestFragPolicyIsExact(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	tried := 0
	for seed := 0; tried < 15; seed++ {
		p, m := randomBatch(t, r)
		want := leastFragByBruteForce(m, p)
		if math.IsInf(want, 1) {
			continue
		}
		tried++
		res, err := alloc.Run(context.Background(), p, alloc.Options{Policy: alloc.Frag, Lookahead: m, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Assignments) != len(p.Claims) || !res.Stats.FragExact {
			t.Fatalf("seed %d: %d of %d claims admitted, exact %v", seed, len(res.Assignments), len(p.Claims), res.Stats.FragExact)
		}
		s := model.NewState(p)
		for _, a := range res.Assignments {
			take(s, a)
		}
		if got := frag(m, s); !near(got, want) {
			t.Fatalf("seed %d: frag %v, least %v", seed, got, want)
		}
	}
}
