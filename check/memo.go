package check

import (
	"hash/fnv"
	"io"
	"sync"

	"github.com/drasat/drasat/input"
)

// Memo keeps, between checks of the same cluster, what a check computes
// from the devices, nodes and classes alone: whether a class's and a
// request's selectors fail at run time on some device a node's search may
// reach (the part of rule 10 that evaluates selectors on every device of
// every node, most of a check's time on a large cluster). It is reused
// while every ResourceSlice, Node, DeviceClass and DeviceTaintRule has the same UID and
// resourceVersion as at the last check, and forgotten otherwise; objects
// without a resourceVersion (read from files) are never memoised. One
// Memo serves one check at a time.
type Memo struct {
	mu     sync.Mutex
	key    uint64
	selErr map[string]bool
}

// inventoryKey identifies objs' slices, nodes and classes by UID and
// resourceVersion, whatever their order; ok is false when one lacks
// either.
func inventoryKey(objs *input.Objects) (key uint64, ok bool) {
	add := func(kind, name, uid, rv string) bool {
		if uid == "" || rv == "" {
			return false
		}
		h := fnv.New64a()
		for _, s := range []string{kind, name, uid, rv} {
			io.WriteString(h, s)
			h.Write([]byte{0})
		}
		key += h.Sum64()
		return true
	}
	for _, s := range objs.Slices {
		if !add("s", s.Name, string(s.UID), s.ResourceVersion) {
			return 0, false
		}
	}
	for _, n := range objs.Nodes {
		if !add("n", n.Name, string(n.UID), n.ResourceVersion) {
			return 0, false
		}
	}
	for _, c := range objs.Classes {
		if !add("c", c.Name, string(c.UID), c.ResourceVersion) {
			return 0, false
		}
	}
	for _, r := range objs.TaintRules {
		if !add("t", r.Name, string(r.UID), r.ResourceVersion) {
			return 0, false
		}
	}
	// The counts too: a sum of hashes alone would not tell an object
	// listed twice from none.
	return key ^ uint64(len(objs.Slices))<<40 ^ uint64(len(objs.Nodes))<<20 ^ uint64(len(objs.Classes))<<8 ^ uint64(len(objs.TaintRules)), true
}

// lend returns the selector verdicts for objs' inventory (a map the check
// fills) and a function that returns them; nil when objs cannot be
// memoised.
func (m *Memo) lend(objs *input.Objects) (map[string]bool, func()) {
	key, ok := inventoryKey(objs)
	if !ok {
		return nil, func() {}
	}
	m.mu.Lock()
	if m.selErr == nil || m.key != key {
		m.key, m.selErr = key, map[string]bool{}
	}
	return m.selErr, m.mu.Unlock
}
