package model

import "errors"

// Reason is the kind of a claim's rejection. Callers act on it (the adapter
// leaves pods to the scheduler, a report counts capacity rejections) with
// ReasonOf instead of parsing the message, which is for people.
type Reason string

// Why a claim is not allocated. The build sets the first group on
// Claim.Err; the engine adds the second for claims it did not admit.
const (
	// ReasonInvalid: the claim cannot be served as written (an unknown
	// class, a selector that fails, a count past the result limit, a pod
	// reserved on an unknown node).
	ReasonInvalid Reason = "Invalid"
	// ReasonUnsupported: the claim uses what drasat does not model yet.
	ReasonUnsupported Reason = "Unsupported"
	// ReasonSelectorBudget: its CEL selectors were not evaluated within the
	// run's CEL cost or time (a BudgetError).
	ReasonSelectorBudget Reason = "SelectorBudget"
	// ReasonSearchOrder: the scheduler's allocator, which searches in
	// publication order, fails on it or could not be followed.
	ReasonSearchOrder Reason = "SearchOrder"
	// ReasonLeftToScheduler: its pod has what drasat does not model
	// (PodLeftToScheduler); the kube-scheduler allocates it.
	ReasonLeftToScheduler Reason = "LeftToScheduler"
	// ReasonNoNode: no node accepts its pods (cordon, taint, affinity,
	// node resources), or they cannot run where its devices are.
	ReasonNoNode Reason = "NoNode"
	// ReasonSamePod: another claim of its pods cannot be allocated, or the
	// pod's claims cannot share a node.
	ReasonSamePod Reason = "SamePod"

	// ReasonNoPlacement: it fits nowhere even alone.
	ReasonNoPlacement Reason = "NoPlacement"
	// ReasonCapacity: it fits alone, but not together with the claims
	// admitted (devices, counters or shared capacity are used up).
	ReasonCapacity Reason = "Capacity"
	// ReasonNodeResources: its pods' CPU, memory or other node resources
	// do not fit on the nodes that could take its devices.
	ReasonNodeResources Reason = "NodeResources"
)

// Rejection is a claim's rejection: its Reason, and the error that says it.
type Rejection struct {
	Reason Reason
	Err    error
}

// Reject wraps err as a rejection for reason.
func Reject(reason Reason, err error) *Rejection { return &Rejection{Reason: reason, Err: err} }

func (r *Rejection) Error() string { return r.Err.Error() }
func (r *Rejection) Unwrap() error { return r.Err }

// RejectionOf is err as a Rejection: the one in its chain, or, for an error
// the build made without one, by what it wraps (a BudgetError, an
// unsupported feature), else ReasonInvalid. Nil for nil.
func RejectionOf(err error) *Rejection {
	if err == nil {
		return nil
	}
	if r := (*Rejection)(nil); errors.As(err, &r) {
		return r
	}
	if be := (*BudgetError)(nil); errors.As(err, &be) {
		return Reject(ReasonSelectorBudget, err)
	}
	if errors.Is(err, errUnsupported) {
		return Reject(ReasonUnsupported, err)
	}
	return Reject(ReasonInvalid, err)
}

// ReasonOf is the reason of a rejection error; "" when err is nil.
func ReasonOf(err error) Reason {
	if r := RejectionOf(err); r != nil {
		return r.Reason
	}
	return ""
}
