package alloc

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/model"
)

// deadlineLookahead records the deadline Run gives the look-ahead and
// changes nothing.
type deadlineLookahead struct{ got time.Time }

func (l *deadlineLookahead) Refine(_ context.Context, _ *model.Problem, res *Result, deadline time.Time) *Result {
	l.got = deadline
	return res
}

// TestFragRunEndsWithinTimeout: a frag run gives its look-ahead the end of
// the run's Timeout, not a budget of its own after it: the deadline the
// look-ahead gets is Timeout from when Run started.
func TestFragRunEndsWithinTimeout(t *testing.T) {
	p := build(t, randomInstance(1), "")
	const timeout = 3 * time.Second
	la := &deadlineLookahead{}
	before := time.Now()
	if _, err := Run(context.Background(), p, Options{Policy: Frag, Lookahead: la, Timeout: timeout}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if la.got.Before(before.Add(timeout)) || la.got.After(after.Add(timeout)) {
		t.Errorf("look-ahead deadline %v after the start, want %v", la.got.Sub(before), timeout)
	}
}
