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

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./bench/... ./alloc/... | tee bench.out

clean:
	rm -rf bin bench.out
