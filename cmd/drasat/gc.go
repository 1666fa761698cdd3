package main

import (
	"os"
	"runtime/debug"
)

// gcPercentUnlessSet sets the collector's target to p for a phase of the
// run, unless the environment sets GOGC (the user's setting wins), and
// returns what sets it back: the setting is the process's, and the
// commands' tests run in one process.
func gcPercentUnlessSet(p int) (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	was := debug.SetGCPercent(p)
	return func() { debug.SetGCPercent(was) }
}

// memoryLimitUnlessSet is gcPercentUnlessSet for the soft memory limit
// (GOMEMLIMIT), in bytes.
func memoryLimitUnlessSet(bytes int64) (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	was := debug.SetMemoryLimit(bytes)
	return func() { debug.SetMemoryLimit(was) }
}
