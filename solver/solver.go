// Package solver wraps the gini SAT engine: it loads a CNF built over a
// gini logic circuit, solves under assumptions within a deadline, and
// maximises unary-counted objectives by incremental bound tightening.
package solver

import (
	"context"
	"time"

	"github.com/go-air/gini"
	"github.com/go-air/gini/logic"
	"github.com/go-air/gini/z"
)

// Result of one solve call.
type Result int

const (
	Unknown Result = iota // budget or context ran out
	Sat
	Unsat
)

func (r Result) String() string {
	switch r {
	case Sat:
		return "sat"
	case Unsat:
		return "unsat"
	}
	return "unknown"
}

// S is one incremental SAT instance.
type S struct {
	g       *gini.Gini
	Vars    int
	Clauses int
	Calls   int
}

// New loads the circuit c (all gates) and the plain clauses into gini.
func New(c *logic.C, clauses [][]z.Lit) *S {
	g := gini.NewVc(c.Len(), len(clauses)+3*c.Len())
	c.ToCnf(g)
	for _, cl := range clauses {
		for _, m := range cl {
			g.Add(m)
		}
		g.Add(z.LitNull)
	}
	return &S{g: g, Vars: int(g.MaxVar()), Clauses: len(clauses) + 3*c.Len()}
}

// Solve decides the instance under the assumptions, giving up at the
// deadline or when ctx ends. It solves in slices of growing length so a
// cancelled context is noticed quickly while learnt clauses carry over.
func (s *S) Solve(ctx context.Context, deadline time.Time, assumptions ...z.Lit) Result {
	s.Calls++
	slice := 50 * time.Millisecond
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return Unknown
		}
		s.g.Assume(assumptions...)
		if r := s.g.Try(min(left, slice)); r != 0 {
			return toResult(r)
		}
		slice = min(2*slice, time.Second)
	}
}

func toResult(r int) Result {
	switch r {
	case 1:
		return Sat
	case -1:
		return Unsat
	}
	return Unknown
}

// Value is m's value in the model of the last satisfiable call.
func (s *S) Value(m z.Lit) bool { return s.g.Value(m) }

// Why returns the failed assumptions of the last unsatisfiable call.
func (s *S) Why() []z.Lit { return s.g.Why(nil) }
