# forkfuzz: build, run a short campaign, test.
GO      ?= go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
BIN     := bin/forkfuzz
export GOFLAGS ?= -buildvcs=false
# forkfuzz ships itself into VM initramfs images: build it static.
export CGO_ENABLED := 0

.PHONY: all build run run-native run-sim test test-short fuzz bench vet clean deps gofuzz

all: build

deps:
	@./.ci/deps

build: deps
	$(GO) build -o $(BIN) ./cmd/forkfuzz

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
	$(GO) test -count=1 -timeout 20m ./...

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
	$(GO) test ./campaign/simbench -run '^$$' -fuzz FuzzSim -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeWork -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeResult -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeHeartbeat -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzParseConfig -fuzztime $(FUZZTIME)
	$(GO) test ./checker/cut -run '^$$' -fuzz FuzzServeWorker -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/gate -run '^$$' -fuzz FuzzParseKnownIssues -fuzztime $(FUZZTIME)
	$(GO) test ./agents/executor -run '^$$' -fuzz FuzzParsePMDs -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/redis -run '^$$' -fuzz FuzzReadReply -fuzztime $(FUZZTIME)
	$(GO) test ./campaign/dist -run '^$$' -fuzz FuzzDecodeMinimizeResult -fuzztime $(FUZZTIME)

# go-fuzz (github.com/dvyukov/go-fuzz) on the simulated kernel (campaign/gofuzz),
# in a scratch copy of the module (go-fuzz-build needs go-fuzz-dep in go.mod),
# corpus kept in $(GOFUZZ_WORK)/corpus. With Go 1.26 go-fuzz-build (latest,
# 2022) fails: it cannot copy a dependency's //go:embed directory (porcupine's
# visualization): "copyFile: copying failed: ... copy_file_range: is a
# directory". Rewriting that embed as one //go:embed line per file gets past
# the copy, then its go build fails: "pattern visualization/index.css: no
# matching files found" (the files are not copied). Native fuzzing: make fuzz.
GOFUZZ_WORK ?= workdir/gofuzz
GOFUZZ_TIME ?= 60
gofuzz:
	$(GO) install github.com/dvyukov/go-fuzz/go-fuzz@latest github.com/dvyukov/go-fuzz/go-fuzz-build@latest
	rm -rf $(GOFUZZ_WORK)/src && mkdir -p $(GOFUZZ_WORK)/src $(GOFUZZ_WORK)/corpus
	git ls-files | tar -cf - -T - | tar -xf - -C $(GOFUZZ_WORK)/src
	cd $(GOFUZZ_WORK)/src && $(GO) get github.com/dvyukov/go-fuzz/go-fuzz-dep@v0.0.0-20220726122315-1d375ef9f9f6
	cd $(GOFUZZ_WORK)/src/campaign/gofuzz && go-fuzz-build -o $(abspath $(GOFUZZ_WORK))/gofuzz-fuzz.zip .
	timeout $(GOFUZZ_TIME) go-fuzz -bin $(GOFUZZ_WORK)/gofuzz-fuzz.zip -workdir $(GOFUZZ_WORK)/corpus || test $$? = 124

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./agents/executor/ ./checker/cut/

clean:
	rm -rf bin workdir
