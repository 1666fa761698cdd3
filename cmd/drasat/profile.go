package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// startProfiles starts a CPU profile to cpuPath (none when empty); stop
// ends it. heap writes a heap profile to memPath (nothing when empty): the
// allocations so far, and what is live when it is called (after the
// solve, the problem and its answer). A file that cannot be created is an
// error up front, not after a long run.
func startProfiles(cpuPath, memPath string) (stop, heap func(), err error) {
	stop, heap = func() {}, func() {}
	if memPath != "" {
		f, err := os.Create(memPath)
		if err != nil {
			return nil, nil, fmt.Errorf("flag --memprofile: %w", err)
		}
		heap = func() {
			runtime.GC() // the live heap is up to date
			if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
				fmt.Fprintln(os.Stderr, "warning: --memprofile:", err)
			}
			f.Close()
		}
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err == nil {
			if err = pprof.StartCPUProfile(f); err != nil {
				f.Close()
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("flag --cpuprofile: %w", err)
		}
		stop = func() { pprof.StopCPUProfile(); f.Close() }
	}
	return stop, heap, nil
}
