package bound_test

import (
	"context"
	"testing"
	"time"

	"github.com/drasat/drasat/bound"
	"github.com/drasat/drasat/input"
	"github.com/drasat/drasat/model"
)

// relaxationOf builds the relaxation of claims, failing the test on error.
func relaxationOf(t testing.TB, p *model.Problem, claims []*model.Claim, weight func(*model.Claim) int64) *bound.Relaxation {
	t.Helper()
	rel, err := bound.New(context.Background(), p, claims, weight)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// perNodeModel builds objs and the per-node aggregated model of all its
// claims at unit weight, failing the test on error.
func perNodeModel(t testing.TB, objs *input.Objects) (*model.Problem, *bound.NodeAggregate) {
	t.Helper()
	p, err := model.Build(context.Background(), objs, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	na, err := relaxationOf(t, p, p.Claims, func(*model.Claim) int64 { return 1 }).NodeAggregateBy(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return p, na
}
