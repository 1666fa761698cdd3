package input

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DNSLabel says why name is not a DNS label (RFC 1123), or "" when it is one.
func DNSLabel(name string) string {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Sprintf("%q is not a DNS label: %s", name, strings.Join(msgs, "; "))
	}
	return ""
}

// DNSSubdomain says why name is not a DNS subdomain (RFC 1123), or "" when it
// is one.
func DNSSubdomain(name string) string {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Sprintf("%q is not a DNS subdomain: %s", name, strings.Join(msgs, "; "))
	}
	return ""
}

// QuantityKey encodes a capacity exactly as CEL holds it. CEL gets the
// *resource.Quantity itself, and asApproximateFloat() or add() depend on its
// representation, not only on its value: "0.3" and "300m" are both 300m but
// give different floats. So the key is the format, the mantissa and scale,
// and whether it is held as an int64 or an inf.Dec. AsDec on a copy reveals
// the latter: a Dec-backed quantity returns its own *inf.Dec every time, an
// int64-backed one a fresh one.
func QuantityKey(q resource.Quantity) string {
	q1, q2 := q, q
	d := q1.AsDec()
	held := "i"
	if d == q2.AsDec() {
		held = "d"
	}
	return held + string(q.Format) + ":" + d.UnscaledBig().String() + "e" + strconv.Itoa(int(d.Scale()))
}
