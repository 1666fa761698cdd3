package alloc

import "github.com/drasat/drasat/model"

// Assignment is one claim's allocation: the node it is for (-1 when no node
// matters) and the devices per request.
type Assignment struct {
	Claim *model.Claim
	Node  int
	Picks []Pick
}

// Pick is one device serving alternative Alt of request Req.
type Pick struct{ Req, Alt, Dev int }

// take allocates a's devices in s.
func (a *Assignment) take(s *model.State) {
	for _, pk := range a.Picks {
		TakePick(s, a.Claim, pk)
	}
	s.PlacePod(a.Claim, a.Node)
}

// release undoes take.
func (a *Assignment) release(s *model.State) {
	for i := len(a.Picks) - 1; i >= 0; i-- {
		ReleasePick(s, a.Claim, a.Picks[i])
	}
	s.UnplacePod(a.Claim, a.Node)
}

// FitsPick, TakePick and ReleasePick go through the state with the pick's
// alternative, which says what it consumes of a shared device's capacity
// (and admin access, which holds no device); placers outside alloc (the
// frag baselines) use them too.
func FitsPick(s *model.State, c *model.Claim, pk Pick) bool {
	return s.FitsFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

func TakePick(s *model.State, c *model.Claim, pk Pick) {
	s.TakeFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

func ReleasePick(s *model.State, c *model.Claim, pk Pick) {
	s.ReleaseFor(pk.Dev, c.Requests[pk.Req].Alternatives[pk.Alt], exclusive(c, pk))
}

// claimWeight is the sum of the claims' weights in as (their Weight, whatever the objective).
func claimWeight(as []*Assignment) int64 {
	var w int64
	for _, a := range as {
		w += a.Claim.Weight
	}
	return w
}
