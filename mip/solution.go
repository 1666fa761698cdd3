package mip

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/drasat/drasat/model"
)

// Solution is a solver's answer: its status line, objective and the values
// of the variables it lists (the others are 0).
type Solution struct {
	Status    string
	Objective float64
	Values    map[string]float64
}

// ReadCBCSolution reads the file CBC writes with `solve solu FILE`: a
// status line ("Optimal - objective value 105.00000000") and one line per
// non-zero variable ("index name value reduced-cost", possibly flagged
// "**" when infeasible).
func ReadCBCSolution(r io.Reader) (*Solution, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	sol := &Solution{Values: map[string]float64{}}
	first := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if first {
			first = false
			sol.Status = line
			if i := strings.LastIndex(line, "objective value"); i >= 0 {
				v, err := strconv.ParseFloat(strings.TrimSpace(line[i+len("objective value"):]), 64)
				if err != nil {
					return nil, fmt.Errorf("cbc solution: status line %q: no objective value", line)
				}
				sol.Objective = v
			}
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "**"))
		if len(f) < 3 {
			return nil, fmt.Errorf("cbc solution: line %q: want INDEX NAME VALUE", line)
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return nil, fmt.Errorf("cbc solution: line %q: bad value", line)
		}
		sol.Values[f[1]] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if first {
		return nil, fmt.Errorf("cbc solution: empty")
	}
	return sol, nil
}

// Choice is one admitted claim of a solution: its node (-1 when no node
// variable chose it) and its picks.
type Choice struct {
	Claim *model.Claim
	Node  int
	Picks []PickRef
}

// PickRef is one device serving a request alternative.
type PickRef struct{ Req, Alt, Dev int }

// Decode reads the admitted claims from a solution's values: the claims
// of a simple class take the class's picked devices in input order.
func (prog *Program) Decode(values map[string]float64) []Choice {
	on := func(v *Var) bool { return math.Round(values[v.Name]) >= 1 }
	byClaim := map[*model.Claim]*Choice{}
	var order []*model.Claim
	choice := func(c *model.Claim) *Choice {
		if ch := byClaim[c]; ch != nil {
			return ch
		}
		ch := &Choice{Claim: c, Node: -1}
		byClaim[c] = ch
		order = append(order, c)
		return ch
	}
	next := map[*model.Claim]int{} // simple class leader -> claims given out
	for _, v := range prog.Vars {
		if !on(v) {
			continue
		}
		switch v.Kind {
		case Admit:
			choice(v.Claims[0])
		case NodeChoice:
			choice(v.Claims[0]).Node = v.Node
		case ClassPick:
			lead := v.Claims[0]
			cls := prog.class[lead]
			if next[lead] >= len(cls) {
				continue // more picks than claims: not in a feasible solution
			}
			c := cls[next[lead]]
			next[lead]++
			choice(c).Picks = append(choice(c).Picks, PickRef{0, 0, v.Dev})
		case Pick:
			ch := choice(v.Claims[0])
			ch.Picks = append(ch.Picks, PickRef{v.Req, v.Alt, v.Dev})
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].Index < order[j].Index })
	out := make([]Choice, len(order))
	for i, c := range order {
		out[i] = *byClaim[c]
	}
	return out
}
