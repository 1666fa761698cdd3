package input

import (
	"os"
	"syscall"
	"testing"
)

// BenchmarkLoadFile reads the file named by DRASAT_LOAD_FILE, as drasat
// allocate -f does, with the fast path for common documents (fast) and
// without it (exact), and reports the process's CPU time per load
// beside the wall time; it is skipped without the variable. With a file
// written once by tools/scalegen it times the reading alone:
//
//	go run ./tools/scalegen/cmd/scalegen -nodes 1000 -gpus 8 -claims 30000 -seed 1 > c1000.yaml
//	DRASAT_LOAD_FILE=$PWD/c1000.yaml go test -run '^$' -bench LoadFile/fast -benchtime 1x ./input/
func BenchmarkLoadFile(b *testing.B) {
	path := os.Getenv("DRASAT_LOAD_FILE")
	if path == "" {
		b.Skip("DRASAT_LOAD_FILE not set")
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, fast := range []bool{true, false} {
		name := "exact"
		if fast {
			name = "fast"
		}
		b.Run(name, func(b *testing.B) {
			defer func(was bool) { fastYAML = was }(fastYAML)
			fastYAML = fast
			b.SetBytes(st.Size())
			b.ReportAllocs()
			cpu0 := processCPUSeconds()
			for i := 0; i < b.N; i++ {
				if _, _, err := Load([]string{path}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((processCPUSeconds()-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
}

func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
