#!/bin/sh
# go-fuzz (github.com/dvyukov/go-fuzz) for forkfuzz: build, run, compare.
#
#   gofuzz.sh run WORK SECONDS          both entry points (Fuzz: the simulated
#                                       kernel; FuzzParse: the program parser),
#                                       SECONDS each, corpora kept in WORK
#   gofuzz.sh compare WORK SECONDS M... per simulated-kernel mutant M: seconds
#                                       to the first crasher, go-fuzz vs the
#                                       native FuzzSim, SECONDS at most each
#
# go-fuzz-build (its last release, 2022) needs two workarounds with Go 1.26,
# both applied to a scratch copy in WORK/src, never to this tree:
# - it copies packages into a GOPATH of its own and fails on an embedded
#   directory (porcupine's visualization/): the scratch copy replaces
#   porcupine with a copy whose //go:embed is rewritten as Go source
#   (campaign/gofuzz/unembed);
# - its instrumentation breaks crypto/internal/fips140/bigmod ("misplaced
#   compiler directive"): that package is left uninstrumented (-preserve).
set -eu
cmd=${1:?usage: gofuzz.sh run|compare WORK SECONDS [MUTANT...]}
work=${2:?WORK}
secs=${3:?SECONDS}
shift 3
GO=${GO:-go}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
work=$(cd "$work" && pwd)
gobin=$($GO env GOPATH)/bin
export PATH="$gobin:$PATH"

build() {
	$GO install github.com/dvyukov/go-fuzz/go-fuzz@latest github.com/dvyukov/go-fuzz/go-fuzz-build@latest
	rm -rf "$work/src" "$work/porcupine"
	mkdir -p "$work/src"
	(cd "$root" && git ls-files | tar -cf - -T -) | tar -xf - -C "$work/src"
	pc=$(cd "$work/src" && $GO list -m -f '{{.Dir}}' github.com/anishathalye/porcupine)
	cp -r "$pc" "$work/porcupine"
	chmod -R u+w "$work/porcupine"
	(cd "$root" && $GO run ./campaign/gofuzz/unembed "$work/porcupine")
	cd "$work/src"
	$GO mod edit -replace github.com/anishathalye/porcupine=../porcupine
	$GO get github.com/dvyukov/go-fuzz/go-fuzz-dep@v0.0.0-20220726122315-1d375ef9f9f6
	cd campaign/gofuzz
	go-fuzz-build -preserve crypto/internal/fips140/bigmod -func Fuzz -o "$work/sim.zip" .
	go-fuzz-build -preserve crypto/internal/fips140/bigmod -func FuzzParse -o "$work/parse.zip" .
	cd "$root"
}

# seconds to the first crasher in dir $1/crashers while go-fuzz runs (at
# most $secs); prints "none" when none came.
gofuzz_until_crash() {
	bin=$1 dir=$2
	mkdir -p "$dir"
	go-fuzz -bin "$bin" -workdir "$dir" -procs 1 >"$dir/log" 2>&1 &
	pid=$!
	t=0 found=none
	while [ $t -lt "$secs" ]; do
		sleep 1
		t=$((t + 1))
		if [ -n "$(ls "$dir/crashers" 2>/dev/null | grep -v '\.' | head -1)" ]; then
			found=$t
			break
		fi
	done
	kill $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
	echo "$found"
}

case $cmd in
run)
	build
	mkdir -p "$work/parse/corpus"
	cp "$root"/corpus/seeds/*.ffz "$root"/corpus/regress/*.ffz "$work/parse/corpus/" 2>/dev/null || true
	for entry in sim parse; do
		echo "go-fuzz $entry: ${secs}s, corpus in $work/$entry"
		timeout "$secs" go-fuzz -bin "$work/$entry.zip" -workdir "$work/$entry" -procs 1 >"$work/$entry.log" 2>&1 || true
		tail -1 "$work/$entry.log"
		echo "go-fuzz $entry: corpus $(ls "$work/$entry/corpus" | wc -l), crashers $(ls "$work/$entry/crashers" 2>/dev/null | grep -vc '\.' || true)"
	done
	;;
compare)
	[ $# -gt 0 ] || { echo "compare: name at least one mutant (forkfuzz run --target sim --fork async --list-mutants)" >&2; exit 2; }
	build
	# -d=libfuzzer on the module's packages: the coverage instrumentation
	# go test -fuzz adds itself (without it the native fuzzer runs blind).
	(cd "$work/src" && $GO test -c -gcflags='github.com/forkfuzz/forkfuzz/...=-d=libfuzzer' -o "$work/simbench.test" ./campaign/gofuzz)
	printf '%-32s %12s %12s\n' mutant go-fuzz native
	for m in "$@"; do
		rm -rf "$work/cmp-$m"
		g=$(FORKFUZZ_SIM_MUTANT=$m gofuzz_until_crash "$work/sim.zip" "$work/cmp-$m")
		start=$(date +%s)
		if (cd "$work/cmp-$m" && FORKFUZZ_SIM_MUTANT=$m "$work/simbench.test" -test.run '^$' -test.fuzz '^FuzzSim$' -test.fuzztime "${secs}s" \
			-test.parallel 1 -test.fuzzcachedir "$work/cmp-$m/native-cache" >"$work/cmp-$m/native.log" 2>&1); then
			n=none
		else
			n=$(($(date +%s) - start))
		fi
		printf '%-32s %12s %12s\n' "$m" "$g" "$n"
	done
	echo "(seconds to the first crasher; none: not within ${secs}s; both on one worker, test binaries built beforehand;"
	echo " go-fuzz starts from an empty corpus, the native FuzzSim from its 3 f.Add seeds, which alone catch some mutants: 0 s)"
	;;
*)
	echo "gofuzz.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
