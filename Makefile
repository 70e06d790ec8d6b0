# forkfuzz: build, run a short campaign, test.
GO      ?= go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
BIN     := bin/forkfuzz
export GOFLAGS ?= -buildvcs=false
# forkfuzz ships itself into VM initramfs images: build it static.
export CGO_ENABLED := 0

.PHONY: all build run run-native run-sim test test-short fuzz bench vet clean deps gofuzz gofuzz-compare

all: build

deps:
	@./.ci/deps

# The binary names the commit it was built from (forkfuzz version, every
# report and CI JSON): GOFLAGS has -buildvcs=false, so stamp it here,
# REV-dirty when tracked or untracked (not ignored) files differ from it;
# without git or outside a checkout nothing is stamped ("forkfuzz devel").
# Recursive (=) variables: git runs only when a binary is built.
VERSION_PKG := github.com/forkfuzz/forkfuzz/internal/version
VCS_REV      = $(shell git rev-parse HEAD 2>/dev/null)
VCS_DIRTY    = $(shell test -n "$$(git status --porcelain 2>/dev/null | head -1)" && echo -dirty)
VCS_TIME     = $(shell git log -1 --format=%cI 2>/dev/null)
LDFLAGS      = $(if $(VCS_REV),-X $(VERSION_PKG).commit=$(VCS_REV)$(VCS_DIRTY) -X $(VERSION_PKG).commitTime=$(VCS_TIME))

build: deps
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/forkfuzz

# The main job: a short real campaign (about a minute of fuzzing) in a QEMU
# VM booted with Debian's linux-image-cloud-amd64 (fetched, not installed).
run: build
	$(BIN) run --target qemu --duration 1m --workdir workdir

# The same on the host kernel, and on the simulated Async-fork kernel.
run-native: build
	$(BIN) run --target native --duration 1m --workdir workdir

run-sim: build
	$(BIN) run --target sim --fork async --duration 1m --workdir workdir

# The test suite (what CI runs). Real fork(), no mocks.
test: deps vet
	$(GO) test -count=1 -timeout 30m ./...

test-short:
	$(GO) test -short -count=1 ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...

# Native fuzzing of every parser, decoder and the simulated kernel, 30s each.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./fuzz/prog -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./fuzz/obs -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)
	$(GO) test ./agents/vm -run '^$$' -fuzz FuzzReadMsg -fuzztime $(FUZZTIME)
	$(GO) test ./agents/vm -run '^$$' -fuzz FuzzParseTargetFile -fuzztime $(FUZZTIME)
	$(GO) test ./kernel/report -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./checker -run '^$$' -fuzz FuzzCheck -fuzztime $(FUZZTIME)
	$(GO) test ./fuzz/gen -run '^$$' -fuzz FuzzFromBytes -fuzztime $(FUZZTIME)
	$(GO) test ./fuzz/gen -run '^$$' -fuzz FuzzMutate -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/gofuzz -run '^$$' -fuzz FuzzSim -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeWork -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeResult -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeHeartbeat -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzParseConfig -fuzztime $(FUZZTIME)
	$(GO) test ./checker/cut -run '^$$' -fuzz FuzzServeWorker -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/gate -run '^$$' -fuzz FuzzParseKnownIssues -fuzztime $(FUZZTIME)
	$(GO) test ./agents/executor -run '^$$' -fuzz FuzzParsePMDs -fuzztime $(FUZZTIME)
	$(GO) test ./internal/ksyms -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./internal/kvfile -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./bench/redis -run '^$$' -fuzz FuzzReadReply -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeMinimizeResult -fuzztime $(FUZZTIME)

# go-fuzz (github.com/dvyukov/go-fuzz) on the simulated kernel and the
# program parser (campaign/gofuzz), built in a scratch copy of the module
# (campaign/gofuzz/gofuzz.sh says why), corpora kept in $(GOFUZZ_WORK).
# gofuzz-compare: seconds to the first crasher per simulated-kernel mutant,
# go-fuzz vs the native FuzzSim. Native fuzzing of every parser: make fuzz.
GOFUZZ_WORK ?= workdir/gofuzz
GOFUZZ_TIME ?= 60
GOFUZZ_MUTANTS ?= odf-break-refcount async-mmap-nosync async-rollback-partial async-no-ptl async-nested-fork async-kill-norecover
gofuzz:
	GO=$(GO) ./campaign/gofuzz/gofuzz.sh run $(GOFUZZ_WORK) $(GOFUZZ_TIME)

gofuzz-compare:
	GO=$(GO) ./campaign/gofuzz/gofuzz.sh compare $(GOFUZZ_WORK) $(GOFUZZ_TIME) $(GOFUZZ_MUTANTS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./agents/executor/ ./checker/cut/

clean:
	rm -rf bin workdir
