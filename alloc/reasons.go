package alloc

// NoPlacementReason is the reason of a claim that fits nowhere even alone,
// until explain.Reasons (asked by the caller, within its budget) says why.
const NoPlacementReason = "no placement found for it, even alone"

// fitsAloneReason is the objective's verdict on a claim that fits alone
// but was not admitted.
func fitsAloneReason(objective string) string {
	if objective == Ordered {
		return "does not fit together with the claims admitted before it"
	}
	return "fits alone, but admitting it would displace more valuable claims (capacity)"
}
