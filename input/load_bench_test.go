package input

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// hugeDoc streams one YAML document of about size bytes without holding it
// in memory: a Node with ever more labels.
type hugeDoc struct {
	size, n   int
	buf, line []byte
}

func (h *hugeDoc) Read(p []byte) (int, error) {
	if len(h.buf) == 0 {
		if h.n >= h.size {
			return 0, io.EOF
		}
		if h.n == 0 {
			h.buf = []byte("apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  labels:\n")
		} else {
			h.line = fmt.Appendf(h.line[:0], "    label-%09d: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\n", h.n)
			h.buf = h.line
		}
		h.n += len(h.buf)
	}
	k := copy(p, h.buf)
	h.buf = h.buf[k:]
	return k, nil
}

// BenchmarkLoadOversizedDocument loads one 200 MB document, which must be
// rejected past MaxDocBytes; B/op (run with -benchmem) bounds the memory
// it takes before that: proportional to MaxDocBytes, not to the input.
func BenchmarkLoadOversizedDocument(b *testing.B) {
	b.ReportAllocs()
	defer reportPeakHeap(b)()
	for i := 0; i < b.N; i++ {
		_, _, err := Load([]string{"-"}, &hugeDoc{size: 200 << 20})
		if err == nil || !strings.Contains(err.Error(), "larger than") {
			b.Fatalf("err = %v, want the document limit", err)
		}
	}
}

// BenchmarkLoadLargestDocument loads one document just under MaxDocBytes:
// the memory a run may take per document read.
func BenchmarkLoadLargestDocument(b *testing.B) {
	b.ReportAllocs()
	defer reportPeakHeap(b)()
	for i := 0; i < b.N; i++ {
		objs, _, err := Load([]string{"-"}, &hugeDoc{size: MaxDocBytes - 100})
		if err != nil || len(objs.Nodes) != 1 {
			b.Fatalf("err = %v", err)
		}
	}
}

// reportPeakHeap samples the live heap every millisecond until the
// returned function is called, and reports the largest sample as
// peak-heap-MiB (B/op counts every allocation, not what is live at once).
func reportPeakHeap(b *testing.B) func() {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := make(chan struct{})
	done := make(chan uint64)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(stop)
		peak := <-done
		b.ReportMetric(float64(peak-min(peak, base.HeapAlloc))/(1<<20), "peak-heap-MiB")
	}
}
