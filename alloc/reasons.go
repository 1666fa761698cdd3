package alloc

import (
	"errors"

	"github.com/drasat/drasat/model"
)

// NoPlacementReason is the message of a claim that fits nowhere even alone,
// until explain.FillReasons (asked by the caller, within its budget) says
// why.
const NoPlacementReason = "no placement found for it, even alone"

// errDoesNotFit rejects a claim a sequential placer could not place.
var errDoesNotFit = model.Reject(model.ReasonCapacity, errors.New("does not fit"))

var errNoPlacement = model.Reject(model.ReasonNoPlacement, errors.New(NoPlacementReason))

var (
	errDisplacedOrdered = model.Reject(model.ReasonCapacity, errors.New("does not fit together with the claims admitted before it"))
	errDisplaced        = model.Reject(model.ReasonCapacity, errors.New("fits alone, but admitting it would displace more valuable claims (capacity)"))
)

// fitsAloneReason is the objective's verdict on a claim that fits alone
// but was not admitted: the claims admitted use up what it needs.
func fitsAloneReason(objective string) error {
	if objective == Ordered {
		return errDisplacedOrdered
	}
	return errDisplaced
}
