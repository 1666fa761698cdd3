package model

// DisjointSets is a disjoint-set forest (union-find) over 0..n-1 with path
// halving: the pods that share claims, the relaxation's bins of devices tied
// by counter sets, the engine's components and its groups of bins.
type DisjointSets []int

// NewDisjointSets makes n singleton sets.
func NewDisjointSets(n int) DisjointSets {
	u := make(DisjointSets, n)
	for i := range u {
		u[i] = i
	}
	return u
}

// Find is x's representative.
func (u DisjointSets) Find(x int) int {
	for u[x] != x {
		u[x] = u[u[x]]
		x = u[x]
	}
	return x
}

// Union joins the sets of a and b; b's representative represents both.
func (u DisjointSets) Union(a, b int) { u[u.Find(a)] = u.Find(b) }
