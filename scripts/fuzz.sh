#!/bin/sh
# Builds the libFuzzer targets with clang (ASan+UBSan) in build-fuzz/ and runs
# each for SECONDS (default 20) from the seeds in tests/fuzz/seeds, in a
# scratch corpus, nproc at a time. A crash fails it, with the failing input
# saved in build-fuzz/ as fuzz_NAME-crash-*.
#   scripts/fuzz.sh [SECONDS]
# With FUZZ_SEED (and FUZZ_RUNS, default 200000) each fuzzer runs a fixed
# sequence: the same seeds and seed number give the same inputs, and SECONDS
# only cuts it short. CI runs that (each sequence is run here whole before a
# push), so a red CI is a regression, not a new random find; a campaign
# without FUZZ_SEED explores. Fixed takes no corpus reloads (-reload=0, they
# are timed) and no address randomization (setarch -R where the machine
# allows it): the snapshot reader hashes pointers, so addresses steer coverage.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}
fixed= norand=
if [ -n "${FUZZ_SEED:-}" ]; then
	fixed="-seed=$FUZZ_SEED -runs=${FUZZ_RUNS:-200000} -reload=0"
	if setarch "$(uname -m)" -R true 2>/dev/null; then
		norand="setarch $(uname -m) -R"
	else
		echo "fuzz: setarch -R refused here; the sequences may differ from run to run"
	fi
fi
CC=clang cmake -S . -B build-fuzz -DBUILD_FUZZERS=ON -DBUILD_TESTS=OFF -DSANITIZE=ON \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_trace fuzz_jtok fuzz_timeline fuzz_pickle fuzz_num fuzz_routes fuzz_evpack fuzz_port fuzz_textfmt \
	fuzz_canary >/dev/null
# One fuzzer, its output on stdout; a failing input is saved as build-fuzz/fuzz_$1-crash-* (or leak-,
# timeout-, oom-).
fuzz_one() {
	t=$1
	corpus=$(mktemp -d)
	cp tests/fuzz/seeds/"$t"/* "$corpus"/
	# the hostile corpus (tests/hostile), behind the harness's first byte (the piece size)
	h=$t
	[ "$t" = jtok ] && h=trace	# the tokenizer under the trace parser takes the same files
	if [ -d "tests/hostile/$h" ]; then
		for f in tests/hostile/"$h"/*; do
			{ printf '\100'; cat "$f"; } >"$corpus/hostile-$(basename "$f")"
		done
	fi
	if [ "$t" = canary ]; then	# its hostile files live with the other formats'
		for f in tests/hostile/formats/canary_*.json tests/hostile/formats/json_neither.json; do
			{ printf '\100'; cat "$f"; } >"$corpus/hostile-$(basename "$f")"
		done
	fi
	echo "== fuzz_$t for ${secs}s"
	(cd build-fuzz && $norand ./tests/fuzz/fuzz_"$t" $fixed -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-max_len=65536 -print_final_stats=1 -artifact_prefix="fuzz_$t-" "$corpus" 2>&1 |
		grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb|#[0-9]+ +DONE)|ERROR|SUMMARY|crash-' || true)
	rm -rf "$corpus"
}
# nproc lanes, each running its share of the fuzzers one after another (each fuzzer takes one core,
# so each gets the same seconds it would alone); then each fuzzer's output, in order
targets="trace jtok timeline pickle num routes evpack port textfmt canary"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT INT TERM
lanes=$(nproc)
i=0
for t in $targets; do
	echo "$t" >>"$logs/lane.$((i % lanes))"
	i=$((i + 1))
done
for lane in "$logs"/lane.*; do
	(while read -r t; do fuzz_one "$t" >"$logs/$t.log" 2>&1; done <"$lane") &
done
wait
status=0
for t in $targets; do
	cat "$logs/$t.log"
	for f in build-fuzz/fuzz_"$t"-crash-* build-fuzz/fuzz_"$t"-leak-* build-fuzz/fuzz_"$t"-timeout-* build-fuzz/fuzz_"$t"-oom-*; do
		if [ -e "$f" ]; then
			echo "fuzz_$t found a failing input: $f"
			status=1
		fi
	done
done
exit $status
