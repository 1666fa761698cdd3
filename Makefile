# drasat — see README.md.
GO ?= go
# bash with pipefail: a failing test piped through grep still fails the target.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
EXAMPLE ?= examples/mig-a100
# The version stamped into the binary and the image tag: the git tag, or
# the commit (with -dirty for uncommitted changes).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE ?= ghcr.io/drasat/drasat
DOCKER ?= docker

.PHONY: all build run test race vet fmt bench fuzz clean e2e-bin e2e e2e-load e2e-scale conformance image

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/drasat ./cmd/drasat

# The controller image, tagged with $(VERSION) (never :latest); base images
# are pinned by digest in deploy/Dockerfile. Then set the tag in
# deploy/kustomization.yaml (images:) and kubectl apply -k deploy/.
image:
	$(DOCKER) build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t $(IMAGE):$(VERSION) .
	@echo "built $(IMAGE):$(VERSION)"

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

# The load test (k8s/e2e/load_test.go, build tag e2eload; not part of
# `make test`): the MIG bench claims as pods, scheduler alone vs drasat.
# LOAD_SIZE=16x8:1000 for the large instance.
# The load test, one arrival pattern after the other (LOAD_PATTERNS), each
# with the scheduler alone and with drasat; their rows of the table in
# docs/performance.md are appended to LOAD_OUT, printed at the end.
LOAD_PATTERNS ?= burst waves stream departures
LOAD_OUT ?= bin/load-table.md
e2e-load: e2e-bin
	@mkdir -p $(dir $(LOAD_OUT)); status=0; for p in $(LOAD_PATTERNS); do \
		LOAD_PATTERN=$$p LOAD_OUT=$(abspath $(LOAD_OUT)) $(GO) test -tags e2eload -count=1 -timeout 60m -v -run TestLoadMIG ./k8s/e2e/ || status=1; \
	done; cat $(LOAD_OUT); exit $$status

# The scale test (k8s/e2e/scale_test.go, build tag e2eload; not part of
# `make test`): drasat's controller on SCALE_NODES fake nodes (8 A100 MIG
# GPUs each, slices as the NVIDIA driver publishes them, no kubelet) and a
# stream of SCALE_PODS gated pods at SCALE_RATE a second; its row of the
# table in docs/performance.md is appended to SCALE_OUT. The issue's size is
# SCALE_NODES=1000 SCALE_PODS=5000 (about 20 minutes on 2 cores).
SCALE_NODES ?= 200
SCALE_PODS ?= 1000
SCALE_RATE ?= 10
SCALE_OUT ?= bin/scale-table.md
e2e-scale: e2e-bin
	@mkdir -p $(dir $(SCALE_OUT))
	SCALE_NODES=$(SCALE_NODES) SCALE_PODS=$(SCALE_PODS) SCALE_RATE=$(SCALE_RATE) SCALE_OUT=$(abspath $(SCALE_OUT)) \
		$(GO) test -tags e2eload -count=1 -timeout 90m -v -run '^TestLoadScale$$' ./k8s/e2e/
	cat $(SCALE_OUT)

# Upstream conformance: every case of the structured allocator's own test
# table (TestAllocator of k8s.io/dynamic-resource-allocation, the version in
# go.mod), extracted at test time, run against drasat (tools/conformance;
# docs/semantics.md). Prints the "conformance: N cases, ..." line.
conformance:
	$(GO) test -count=1 -timeout 20m -v -run '^TestConformance$$' ./tools/conformance/ | grep -v '^=== RUN'

# All tests: gofmt and vet must be clean, every package's tests, including
# the end-to-end suite (k8s/e2e; skipped with -short), the race detector on
# the packages that run goroutines, then the conformance suite.
test: e2e-bin
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2eload ./k8s/e2e/   # the load test builds only with its tag: keep it compiling
	$(GO) test -count=1 -timeout 30m -skip '^TestConformance$$' ./...
	$(MAKE) --no-print-directory race
	$(MAKE) --no-print-directory conformance

# The packages that start goroutines (the engine's parallel stages, the
# solver's background search, the controller and its leader election and
# health, bench's heap sampler, the CLI's interruptible loading, explain's
# parallel reasons, the model's decoding ahead of the input) again under
# the race detector. -short skips the long
# scenario sweeps (race-instrumented code runs several times slower);
# k8s/e2e is not included (its components are separate processes).
RACE_PKGS ?= ./alloc/ ./solver/ ./k8s/ ./bench/ ./cmd/drasat/ ./explain/ ./model/ ./input/
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
