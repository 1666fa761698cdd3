package hold_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drasat/drasat/alloc"
	"github.com/drasat/drasat/bench"
	"github.com/drasat/drasat/model"
)

// TestWaveBound shows what the waves pattern (arrival "waves") can reach
// when the first waves are each admitted whole before the next arrives, as
// they must be when no claim that fits may wait once arrivals have stopped
// for a while: the optimum over all claims with the first k waves' claims
// forced (each outweighs all later ones together), their placement left
// free. A design tool: HOLD_SIM=1 runs it; SIM_SIZES picks the sizes.
func TestWaveBound(t *testing.T) {
	if os.Getenv("HOLD_SIM") == "" {
		t.Skip("HOLD_SIM=1 runs the wave bound")
	}
	for _, size := range strings.Split(envOr("SIM_SIZES", "8x8:300,16x8:1000"), ",") {
		sz, err := bench.ParseSize(size)
		if err != nil {
			t.Fatal(err)
		}
		insts, err := bench.Generate("mig", sz, 1, bench.GenerateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		in := insts[0]
		wave := map[string]int{}
		n := 0
		for _, c := range in.Objs.Claims {
			if c.Status.Allocation == nil {
				n++
			}
		}
		i := 0
		for _, c := range in.Objs.Claims {
			if c.Status.Allocation == nil {
				wave[c.Name] = int(arrival("waves", i, n) / (30 * time.Second))
				i++
			}
		}
		for forced := 0; forced <= 2; forced++ {
			p, err := model.Build(context.Background(), in.Objs, model.Options{Compat: in.Compat})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, c := range p.Claims {
				if w, ok := wave[c.Obj.Name]; ok && w < forced {
					c.Weight = int64(n + 1)
					want++
				}
			}
			out, err := alloc.Run(context.Background(), p, alloc.Options{Objective: alloc.MaxClaims, Policy: alloc.Binpack, Timeout: 60 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			per := make([]int, 4)
			total := 0
			for _, a := range out.Assignments {
				if w, ok := wave[a.Claim.Obj.Name]; ok {
					per[w]++
					total++
				}
			}
			t.Logf("%s: first %d waves forced (%d claims): %d admitted, per wave %v, objective %d, bound %d, optimal %v", size, forced, want, total, per, out.Stats.Objective, out.Stats.Bound, out.Stats.Optimal)
		}
	}
}
