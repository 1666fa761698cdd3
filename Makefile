# drasat — see README.md.
GO ?= go
EXAMPLE ?= examples/mig-a100

.PHONY: all build run test vet fmt bench fuzz clean

all: build

build:
	$(GO) build -o bin/drasat ./cmd/drasat

# Allocate the pending claims of a shipped example; no cluster needed.
run: build
	./bin/drasat allocate -f $(EXAMPLE) -o table

# All tests: gofmt and vet must be clean, then every package's tests.
test:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...

# Go benchmarks, benchstat-friendly (compare two bench.out files with
# benchstat); BENCH selects benchmarks, COUNT the runs of each. The
# side-by-side comparison of policies is `drasat bench` (docs/bench.md).
BENCH ?= .
COUNT ?= 5
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) -timeout 60m ./bench/... ./alloc/... | tee bench.out

clean:
	rm -rf bin bench.out
