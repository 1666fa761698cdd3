# drasat — see README.md.
GO ?= go
EXAMPLE ?= examples/mig-a100

.PHONY: all build run test race vet fmt bench fuzz clean e2e-bin e2e

all: build

build:
	$(GO) build -o bin/drasat ./cmd/drasat

# Allocate the pending claims of a shipped example; no cluster needed.
run: build
	./bin/drasat allocate -f $(EXAMPLE) -o table

# Real Kubernetes components for the end-to-end suite (k8s/e2e): etcd,
# kube-apiserver, kube-scheduler, kube-controller-manager v1.37.1 built from
# Go modules (tools/e2e) into .cache/e2e-bin; only missing ones are built
# (about 13 minutes on 2 cores the first time).
e2e-bin:
	tools/e2e/build.sh

# Only the end-to-end suite against the real components.
e2e: e2e-bin
	$(GO) test -count=1 -timeout 20m -v ./k8s/e2e/

# All tests: gofmt and vet must be clean, then every package's tests,
# including the end-to-end suite (k8s/e2e; skipped with -short), then the
# race detector on the packages that run goroutines.
test: e2e-bin
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	$(MAKE) race

# The packages that start goroutines (the engine's parallel stages, the
# solver's background search, the controller, bench's heap sampler, the
# CLI's interruptible loading, explain's parallel reasons) again under the
# race detector. -short skips the long scenario sweeps (race-instrumented
# code runs several times slower); k8s/e2e is not included (its
# components are separate processes).
RACE_PKGS ?= ./alloc/ ./solver/ ./k8s/ ./bench/ ./cmd/drasat/ ./explain/
race:
	$(GO) test -race -short -count=1 -timeout 20m $(RACE_PKGS)

# Go benchmarks, benchstat-friendly (compare two bench.out files with
# benchstat); BENCH selects benchmarks, COUNT the runs of each. The
# side-by-side comparison of policies is `drasat bench` (docs/bench.md).
BENCH ?= .
COUNT ?= 5
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -timeout 60m ./bench/... ./alloc/... | tee bench.out

clean:
	rm -rf bin bench.out
