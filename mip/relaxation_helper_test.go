package mip_test

import (
	"context"
	"testing"

	"github.com/drasat/drasat/bound"
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
