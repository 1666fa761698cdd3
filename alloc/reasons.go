package alloc

import (
	"context"
	"time"

	"github.com/drasat/drasat/explain"
	"github.com/drasat/drasat/model"
)

// reasonBudget bounds the solver time spent explaining one unallocated
// claim that does not fit even alone.
const reasonBudget = 250 * time.Millisecond

// claimReason gives a one-line reason for an unallocated claim: its own
// error, the objective's verdict for claims that fit alone (the component
// placed each claim alone already), and otherwise the reasons of
// `drasat explain` (explain.Short), so stderr, --report and explain agree.
func claimReason(p *model.Problem, c *model.Claim, objective string, fitsAlone bool) string {
	if c.Err != nil {
		return c.Err.Error()
	}
	if fitsAlone {
		return fitsAloneReason(objective)
	}
	if r, ok := explain.Short(context.Background(), p, c, time.Now().Add(reasonBudget)); ok {
		return r
	}
	// The greedy search missed a placement the solver finds: the claim
	// fits alone after all.
	return fitsAloneReason(objective)
}

func fitsAloneReason(objective string) string {
	if objective == Ordered {
		return "does not fit together with the claims admitted before it"
	}
	return "fits alone, but admitting it would displace more valuable claims (capacity)"
}
