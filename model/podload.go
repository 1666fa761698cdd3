package model

// PodLoad tracks what pod groups placed so far take of the nodes'
// resources (Problem.NodeFree): each group's pods consume their requests
// on the one node of its claims, once per pod.
type PodLoad struct {
	p    *Problem
	used [][]int64 // per node, per resource
}

// NewPodLoad is the load before any pending pod is placed.
func NewPodLoad(p *Problem) *PodLoad {
	l := &PodLoad{p: p, used: make([][]int64, len(p.Nodes))}
	for n := range l.used {
		l.used[n] = make([]int64, len(p.Resources))
	}
	return l
}

// Fits tells whether g's pods fit on node n besides those placed.
func (l *PodLoad) Fits(g *PodGroup, n int) bool { return l.Short(g, n) < 0 }

// Short is the first resource (index in Problem.Resources) g's pods do
// not fit on node n for, or -1.
func (l *PodLoad) Short(g *PodGroup, n int) int {
	if n < 0 {
		return -1
	}
	for j, v := range g.Requests {
		if v > 0 && l.p.Limited(n, j) && SumUnits(l.used[n][j], v) > l.p.NodeFree[n][j] {
			return j
		}
	}
	return -1
}

// Free is what is left of resource j on node n.
func (l *PodLoad) Free(n, j int) int64 { return l.p.NodeFree[n][j] - l.used[n][j] }

// Take places g's pods on node n (n < 0: none, nothing is taken).
func (l *PodLoad) Take(g *PodGroup, n int) {
	if n < 0 {
		return
	}
	for j, v := range g.Requests {
		l.used[n][j] = SumUnits(l.used[n][j], v)
	}
}

// Release undoes Take(g, n).
func (l *PodLoad) Release(g *PodGroup, n int) {
	if n < 0 {
		return
	}
	for j, v := range g.Requests {
		l.used[n][j] -= v
	}
}
