package alloc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drasat/drasat/encode"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/mip"
	"github.com/drasat/drasat/model"
	"github.com/drasat/drasat/solver"
)

// TestRealiseAggregate (DRASAT_REALISE=objects.yaml:target, objects from
// drasat export --objects) solves
// the aggregated model with CBC, carves every GPU as its pattern says and
// asks the SAT model, restricted to those devices, for target claims.
func TestRealiseAggregate(t *testing.T) {
	spec := os.Getenv("DRASAT_REALISE")
	if spec == "" || mip.CBCPath() == "" {
		t.Skip("set DRASAT_REALISE=family:nodes:gpus:claims:target (needs cbc)")
	}
	var path string
	var target int
	if _, err := sscanSpec(spec, &path, &target); err != nil {
		t.Fatal(err)
	}
	objs, _, err := input.Load([]string{path}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	weight := func(c *model.Claim) int64 { return c.Weight }
	var live []*model.Claim
	for _, c := range p.Claims {
		if c.Err == nil {
			live = append(live, c)
		}
	}
	rel := relaxationOf(t, p, live, weight)
	lp := filepath.Join(t.TempDir(), "agg.lp")
	f, _ := os.Create(lp)
	perNode := os.Getenv("DRASAT_REALISE_NODE") != ""
	write := rel.WriteAggregateLP
	if perNode {
		write = rel.WriteNodeAggregateLP
	}
	if _, err := write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sol, err := mip.SolveCBC(context.Background(), lp, 120*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CBC: %s %v", sol.Status, sol.Objective)
	keep, err := rel.RealiseLayouts(sol.Values, perNode)
	if err != nil {
		t.Fatal(err)
	}
	// The claims the solution admits: the first y<k> of class k, classes
	// numbered as bound.New does (first appearance in claim order).
	classOf := map[string]int{}
	took := map[int]int{}
	var chosen []*model.Claim
	for _, c := range live {
		k, ok := classOf[c.ClassKey()]
		if !ok {
			k = len(classOf)
			classOf[c.ClassKey()] = k
		}
		if !perNode {
			if float64(took[k]) < sol.Values[fmt.Sprintf("y%d", k)]-0.5 {
				took[k]++
				chosen = append(chosen, c)
			}
			continue
		}
		// Per node: the claim goes to the first node with room left.
		for n := range p.Nodes {
			key := k*len(p.Nodes) + n
			if float64(took[key]) < sol.Values[fmt.Sprintf("y%d_%d", k, n)]-0.5 {
				took[key]++
				c.FixedNode = n
				chosen = append(chosen, c)
				break
			}
		}
	}
	t.Logf("solution admits %d claims", len(chosen))
	live = chosen
	m, err := encode.Encode(context.Background(), p, live, encode.Options{Symmetry: true, DeviceSymmetry: true, Allowed: func(d int) bool { return keep[d] }})
	if err != nil {
		t.Fatal(err)
	}
	obj := objectiveSorter(m, weight)
	s := solver.New(m.C, m.Clauses)
	t.Logf("restricted model: %d vars, %d clauses", s.Vars, s.Clauses)
	start := time.Now()
	res := s.Solve(context.Background(), time.Now().Add(time.Duration(budgetSecs())*time.Second), obj.Geq(target))
	t.Logf("target %d: %v after %v", target, res, time.Since(start))
	if res == solver.Sat {
		as := decode(p, m, s)
		checkAllocations(t, p, objs, &Result{Assignments: as}, "")
		t.Logf("realised %d claims, checker accepts", len(as))
	}
}

func sscanSpec(spec string, path *string, target *int) (int, error) {
	for i := len(spec) - 1; i >= 0; i-- {
		if spec[i] == ':' {
			*path = spec[:i]
			return fmt.Sscanf(spec[i+1:], "%d", target)
		}
	}
	return 0, fmt.Errorf("bad spec %q", spec)
}

func budgetSecs() int {
	var n int
	if _, err := fmt.Sscanf(os.Getenv("DRASAT_REALISE_SECS"), "%d", &n); err != nil {
		return 120
	}
	return n
}
