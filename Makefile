# The two commands of the README are `make demo` (what `go run` does there)
# and `make test`. Everything a fresh machine needs is built on first use.

GO ?= go
TEST_TIMEOUT ?= 45m

.PHONY: build demo test vet lint fmt-check sandbox-build pins bench soak soak-dc fuzz

# The version is stamped from git describe, which also works where the Go
# toolchain records no commit (a git worktree, -buildvcs=false).
build:
	$(GO) build -ldflags "-X main.version=$$(git describe --tags --always --dirty 2>/dev/null)" -o bin/purser ./cmd/purser

demo:
	$(GO) run ./cmd/purser up --sandbox 2

# Builds the sandbox binaries first (once; cached) so that the build's
# progress is visible and no test binary spends its time limit on it.
# hack/test-deps installs (as root) or names (otherwise) what the tests
# need beyond Go, and starts the test database; its last line is the DSN.
test: sandbox-build
	@dsn=$$(bash hack/test-deps | tail -n 1) && \
	PURSER_TEST_POSTGRES="$$dsn" $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

sandbox-build:
	$(GO) run ./cmd/purser sandbox build --dex --flux

# Go's fuzzing of what a tenant's bytes go through: the API's decoding of
# a body, what purser renders for a member cluster (template, overrides,
# failover mutations, then the admission of the object as written), and
# an Argo workflow's pods as its controller would build them, from the
# hostile-tenant cases as seeds; `make test` runs the seeds alone. CI runs
# each target for a short budget of inputs (FUZZTIME=50000x in .ci/run, a
# few seconds each): a count, not a duration, because Go's fuzzing
# coordinator can fail a run with "context deadline exceeded" when a
# duration ends while a worker on a busy machine is mid-input, with no
# input to blame.
FUZZTIME ?= 500000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./api/v1alpha1
	$(GO) test -run '^$$' -fuzz '^FuzzRender$$' -fuzztime $(FUZZTIME) ./internal/domain/admission
	$(GO) test -run '^$$' -fuzz '^FuzzArgoPods$$' -fuzztime $(FUZZTIME) ./internal/domain/kinds
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeEvent$$' -fuzztime $(FUZZTIME) ./internal/hub/stream

# Copies the pins of the sandbox binaries (go.mod, go.sum and Go files of
# every module under tools/) into internal/sandbox/pins, which go:embed puts
# into the binary; each file gets a .pin suffix so that the go command sees
# data, not a nested module. Run it after changing tools/;
# TestPinsMatchTools fails until then.
pins:
	rm -rf internal/sandbox/pins
	cd tools && find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | while read -r f; do \
		mkdir -p "../internal/sandbox/pins/$$(dirname "$$f")" && cp "$$f" "../internal/sandbox/pins/$$f.pin"; done

vet:
	$(GO) vet ./...

# golangci-lint at a pinned version (.golangci.yml says which linters),
# installed on first use into a cache folder of its own rather than into
# go.mod, whose requires it would double: about 3 min the first time, then
# a run takes seconds once its analysis cache is warm (about 2 min cold).
GOLANGCI_LINT_VERSION ?= v2.15.0
LINT_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/purser/lint/golangci-lint-$(GOLANGCI_LINT_VERSION)
lint:
	@test -x "$(LINT_DIR)/golangci-lint" || { echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(LINT_DIR) (first run only) ..."; \
		GOBIN="$(LINT_DIR)" $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION); }
	"$(LINT_DIR)/golangci-lint" run ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Every benchmark of docs/benchmarks.md in one run, which regenerates the
# document's tables and keeps the raw output in docs/benchmarks.raw.txt
# (hack/benchreport). About an hour on 2 shared vCPU (the design-size
# inventory and agent, the 1,000-job failover and the Karmada scenarios
# are most of it), more on a cold build cache: Karmada's first build takes
# about 9 minutes. PURSER_TEST_POSTGRES must be set for the PostgreSQL columns.
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
# It first runs the rollout model (every step of random changes, pauses,
# rollbacks, joins and syncs against the decision) from a random seed; the
# seed is in its output, and -rollout.model.seed=N replays one.
soak: sandbox-build
	$(GO) test -count=1 -v -run '^TestRolloutModel$$' ./internal/domain/rollout/ -rollout.model.seed=0 -rollout.model.runs=500 -rollout.model.steps=2000
	$(GO) test -count=1 -timeout 3h -v -run '^TestSoak$$' ./test/soak/ -soak.duration=$(SOAK_DURATION) $(SOAK_FLAGS)
	# Control-plane outages (stream, database, hub components), 5 minutes
	# each on the three-DC farm (needs root; CI runs them for twice the lease).
	$(GO) test -count=1 -timeout 1h -v -run '^TestDCControlPlaneOutages$$' ./test/soak/ -soak.outage=5m $(SOAK_FLAGS)

# The DC soak alone, verbose: purser over three data centers on this
# machine (a network namespace each, with NATS, PostgreSQL under Patroni
# over etcd, every component and an agent), under the soak's load while
# whole DCs lose power, are partitioned, or lose the database's primary,
# a DC's links are cut one way or made slow and lossy, its PostgreSQL's
# clock is stepped and a NATS node's disk fills up, besides the chaos
# soak's faults (docs/soak.md). Needs root, Patroni 4 and libfaketime
# (.ci/run installs them). It also runs TestDCScheduleExactlyOnce (a
# schedule each minute through the loss of the leader's DC and of the
# primary at a tick), which waits on whole minutes. `make soak-dc
# SOAK_DURATION=2h` rotates 100 or more DC-level faults.
soak-dc: sandbox-build
	$(GO) test -count=1 -timeout 3h -v -run '^(TestDCSoak|TestDCScheduleExactlyOnce)$$' ./test/soak/ -soak.duration=$(SOAK_DURATION) -soak.dc-schedule -soak.dc-faults=all $(SOAK_FLAGS)
