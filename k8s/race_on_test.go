//go:build race

package k8s

// raceDetector: the race detector slows the engine several times, so a
// run's time-capped steps (the look-ahead's MaxLookahead) end elsewhere.
const raceDetector = true
