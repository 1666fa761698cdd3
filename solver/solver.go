// Package solver wraps the gini SAT engine: it loads a CNF built over a
// gini logic circuit, solves under assumptions within a deadline, and
// maximises unary-counted objectives by incremental bound tightening.
package solver

import (
	"context"
	"runtime"
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
// deadline or when ctx ends. The search runs uninterrupted in gini's
// background solve and is only polled, never sliced: a call that finishes
// follows the same search path whatever the machine's speed, so results are
// deterministic unless the budget runs out.
func (s *S) Solve(ctx context.Context, deadline time.Time, assumptions ...z.Lit) Result {
	s.Calls++
	if time.Until(deadline) <= 0 || ctx.Err() != nil {
		return Unknown
	}
	s.g.Assume(assumptions...)
	run := s.g.GoSolve()
	// Most calls of a neighbourhood search or an explanation end within
	// microseconds: yield to the solving goroutine for a short while
	// before sleeping (a timer's wake-up on a loaded machine takes
	// milliseconds, hundreds of times the solve), then poll soon, then
	// every 5 ms.
	for spin := time.Now(); time.Since(spin) < 200*time.Microsecond; {
		if r, done := run.Test(); done {
			return toResult(r)
		}
		runtime.Gosched()
	}
	wait := 50 * time.Microsecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if r, done := run.Test(); done {
			return toResult(r)
		}
		select {
		case <-ctx.Done():
			return toResult(run.Stop())
		case <-timer.C:
			if !time.Now().Before(deadline) {
				return toResult(run.Stop())
			}
			wait = min(2*wait, 5*time.Millisecond)
			timer.Reset(wait)
		}
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
