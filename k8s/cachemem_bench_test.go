package k8s

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/drasat/drasat/bench"
)

// migSliceJSON is the load test's pool at nodes x 8 GPUs: its
// ResourceSlices as the API server serves them (JSON, the clients'
// default).
func migSliceJSON(tb testing.TB, nodes int) ([][]byte, int) {
	tb.Helper()
	insts, err := bench.Generate("mig", bench.Size{Nodes: nodes, GPUs: 8, Claims: nodes}, 1, bench.GenerateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	devices := 0
	for _, s := range insts[0].Objs.Slices {
		s = s.DeepCopy()
		s.APIVersion, s.Kind = "resource.k8s.io/v1", "ResourceSlice"
		b, err := json.Marshal(s)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
		devices += len(s.Spec.Devices)
	}
	return out, devices
}

// decodeSlice decodes one served slice as client-go's informers do (the
// scheme's codecs).
func decodeSlice(tb testing.TB, b []byte) *resourceapi.ResourceSlice {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return obj.(*resourceapi.ResourceSlice)
}

// BenchmarkSliceCache is what the informer's cache holds of the load
// test's MIG slices (200 nodes x 8 A100, one slice of 26 devices a GPU),
// without a cluster: each slice decoded from the JSON the API server
// serves, then passed through the cache's transform (transform=true) or
// kept as decoded (false). B/device: the live heap the decoded slices
// hold, after a GC, per device. SLICE_HEAP_PROFILE=/tmp/slices writes a
// heap profile with the slices live (/tmp/slices.transform=...):
//
//	go test -run '^$' -bench SliceCache -benchtime 1x ./k8s/
//	SLICE_HEAP_PROFILE=/tmp/slices go test -run '^$' -bench SliceCache -benchtime 1x ./k8s/
//	go tool pprof -sample_index=inuse_space -top /tmp/slices.transform=true
func BenchmarkSliceCache(b *testing.B) {
	for _, transform := range []bool{false, true} {
		b.Run(fmt.Sprintf("transform=%t", transform), func(b *testing.B) {
			served, devices := migSliceJSON(b, 200)
			heap := func() uint64 {
				var m runtime.MemStats
				runtime.GC()
				runtime.GC()
				runtime.ReadMemStats(&m)
				return m.HeapAlloc
			}
			var grown float64
			for range b.N {
				before := heap()
				kept := make([]*resourceapi.ResourceSlice, 0, len(served))
				t := sliceTransform()
				for _, js := range served {
					obj, err := any(decodeSlice(b, js)), error(nil)
					if transform {
						obj, err = t(obj)
						if err != nil {
							b.Fatal(err)
						}
					}
					kept = append(kept, obj.(*resourceapi.ResourceSlice))
				}
				grown = float64(heap()) - float64(before)
				if f := os.Getenv("SLICE_HEAP_PROFILE"); f != "" {
					writeHeapProfile(b, fmt.Sprintf("%s.transform=%t", f, transform))
				}
				runtime.KeepAlive(kept)
			}
			b.ReportMetric(grown/float64(devices), "B/device")
			b.ReportMetric(grown/1e6, "MB")
		})
	}
}

// writeHeapProfile writes the heap profile as of the last GC to file.
func writeHeapProfile(tb testing.TB, file string) {
	f, err := os.Create(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}
