# The two commands of the README are `make demo` (what `go run` does there)
# and `make test`. Everything a fresh machine needs is built on first use.

GO ?= go
TEST_TIMEOUT ?= 45m

.PHONY: build demo test vet fmt-check sandbox-build bench soak

build:
	$(GO) build -o bin/purser ./cmd/purser

demo:
	$(GO) run ./cmd/purser up --sandbox 2

# Builds the sandbox binaries first (once; cached) so that the build's
# progress is visible and no test binary spends its time limit on it.
test: sandbox-build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

sandbox-build:
	$(GO) run ./cmd/purser sandbox build --dex

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every benchmark of docs/benchmarks.md in one run, which regenerates the
# document's tables and keeps the raw output in docs/benchmarks.raw.txt
# (hack/benchreport). About 15 minutes on 2 shared vCPU, more on a cold
# build cache. PURSER_TEST_POSTGRES must be set for the PostgreSQL columns.
# BENCH_FLAGS passes flags: "-dry" (the plan, with each invocation's
# estimate), "-only REGEXP" (a subset).
bench: sandbox-build
	$(GO) run ./hack/benchreport $(BENCH_FLAGS)

# The chaos soak test alone, verbose, so that its summary shows: purser split
# into its components on a 3-node NATS cluster and a PostgreSQL server of its
# own (from the machine's PostgreSQL binaries), under load while processes,
# NATS nodes, PostgreSQL, kube-apiservers and agents are killed or restarted.
# `make soak SOAK_DURATION=30m` for a long run; SOAK_FLAGS passes more, e.g.
# -soak.seed=42 -soak.keep.
SOAK_DURATION ?= 3m
SOAK_FLAGS ?=
soak: sandbox-build
	$(GO) test -count=1 -timeout 3h -v -run '^TestSoak$$' ./test/soak/ -soak.duration=$(SOAK_DURATION) $(SOAK_FLAGS)
