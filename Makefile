# forkfuzz: build, run a short campaign, test.
GO      ?= go
export PATH := /usr/local/go/bin:$(HOME)/go/bin:$(PATH)
BIN     := bin/forkfuzz
export GOFLAGS ?= -buildvcs=false

.PHONY: all build run test test-short fuzz bench vet clean deps

all: build

deps:
	@./.ci/deps

build: deps
	$(GO) build -o $(BIN) ./cmd/forkfuzz

# The main job: a short real campaign (about a minute) on the default target.
run: build
	$(BIN) run --target native --duration 1m --workdir workdir

# The test suite (what CI runs). Real fork(), no mocks.
test: deps vet
	$(GO) test -count=1 -timeout 20m ./...

test-short:
	$(GO) test -short -count=1 ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)
	$(GO) vet ./...

# Native fuzzing of every parser and decoder, 30s each.
fuzz:
	$(GO) test ./fuzz/prog -run '^$$' -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./agents/obs -run '^$$' -fuzz FuzzDecode -fuzztime 30s

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./agents/executor/

clean:
	rm -rf bin workdir
