package baseline

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/drasat/drasat/input"
	resourceapi "k8s.io/api/resource/v1"
)

// BenchmarkUpstreamFile runs the kube-scheduler's allocator, as the
// upstream policy of drasat bench does, on the first
// DRASAT_UPSTREAM_CLAIMS (default 400) pending claims of the file named by
// DRASAT_UPSTREAM_FILE, and reports what one Allocate call (one claim on
// one node) costs and how many a claim takes; skipped without the file.
// With -cpuprofile it shows where the simulation's time goes:
//
//	go run ./tools/scalegen/cmd/scalegen -nodes 128 -gpus 8 -claims 4000 -seed 1 > c128.yaml
//	DRASAT_UPSTREAM_FILE=$PWD/c128.yaml go test -run '^$' -bench UpstreamFile -benchtime 1x -cpuprofile cpu.prof ./bench/baseline/
func BenchmarkUpstreamFile(b *testing.B) {
	path := os.Getenv("DRASAT_UPSTREAM_FILE")
	if path == "" {
		b.Skip("DRASAT_UPSTREAM_FILE not set")
	}
	limit := 400
	if s := os.Getenv("DRASAT_UPSTREAM_CLAIMS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("DRASAT_UPSTREAM_CLAIMS=%q: want a positive number", s)
		}
		limit = n
	}
	objs, _, err := input.Load([]string{path}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var keep []*resourceapi.ResourceClaim
	pending := 0
	for _, c := range objs.Claims {
		if c.Status.Allocation == nil {
			if pending++; pending > limit {
				continue
			}
		}
		keep = append(keep, c)
	}
	objs.Claims = keep
	b.ResetTimer()
	var res *UpstreamResult
	for i := 0; i < b.N; i++ {
		if res, err = Upstream(context.Background(), objs, UpstreamFeaturesFor(objs)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	claims := float64(min(pending, limit))
	b.ReportMetric(float64(res.Admitted()), "admitted")
	b.ReportMetric(float64(res.AllocateCalls)/claims, "calls/claim")
	b.ReportMetric(res.Wall.Seconds()*1e3/float64(res.AllocateCalls), "ms/call")
	b.ReportMetric(float64(res.KnownFailures)/claims, "known-failures/claim")
}
