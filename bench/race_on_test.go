//go:build race

package bench

// raceDetector: the race detector slows the engine several times, and
// most of all its monolithic steps (loading a 225,000-gate circuit into
// the SAT solver: 81 ms plain, 648 ms under -race on mig 4x8:150 count).
const raceDetector = true
