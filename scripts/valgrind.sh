#!/bin/sh
# The test suite under valgrind's memcheck, in build/: every Check unit suite
# but the tests tagged slow (the allocation-failure loops, thousands of
# databases, and the whole-fixture analysis runs: ASan and LSan check them in
# the ASan pass), then the server itself under memcheck for the API
# validator's whole walk (every upload kind, every endpoint, the error
# answers, compare, a clean SIGTERM stop). Any memory error or definite leak
# fails it. The walk and each unit test case (CK_RUN_SUITE and CK_RUN_CASE, from
# the names ctest lists, unit.SUITE.CASE) are jobs of their own, nproc at a time; each job's output is printed once
# all have ended, a failed job's under a line naming it.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
command -v valgrind >/dev/null || apt-get install -y -qq --no-install-recommends valgrind >/dev/null
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"
suites=$(ctest --test-dir build -N -R '^unit\.' | sed -n 's/^ *Test *#[0-9]*: unit\.//p')
[ -n "$suites" ] || { echo "valgrind: ctest lists no unit suites in build/ (configured with -DBUILD_TESTS=ON?)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
export out
export vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite"
# Check forks a child per test: memcheck follows it. Its timeouts (4 s a test unless set) are
# for native speed: memcheck runs 20-50x slower (the sort test's 30,000-element patterns ran out
# of 4 s on a busy 2-core machine)
export CK_TIMEOUT_MULTIPLIER="${CK_TIMEOUT_MULTIPLIER:-10}" CK_EXCLUDE_TAGS=slow
# the walk first: the longest job
status=0
# shellcheck disable=SC2016
printf '%s\n' walk "$suites" | xargs -P "$(nproc)" -I{} sh -c '
	if [ {} = walk ]; then
		SERVER_WRAPPER="$vg" node tests/schema/validate.mjs build
	else
		job={}
		CK_RUN_SUITE=${job%%.*} CK_RUN_CASE=${job#*.} $vg --trace-children=yes build/tests/check_unit
	fi >"$out/{}.log" 2>&1 || { echo "exit $?" >>"$out/{}.log"; touch "$out/{}.failed"; }' || status=1
for job in walk $suites; do
	if [ -e "$out/$job.failed" ]; then
		echo "valgrind: $job FAILED:"
		status=1
	else
		echo "valgrind: $job:"
	fi
	cat "$out/$job.log"
done
# a case selected by a wrong name runs nothing and passes: all of them together must check something
checks=$(cat "$out"/*.log | sed -n 's/.*Checks: \([0-9]*\).*/\1/p' | awk '{n += $1} END {print n + 0}')
echo "valgrind: $checks unit checks under memcheck"
[ "$checks" -gt 0 ] || { echo "valgrind: no unit check ran" >&2; status=1; }
exit $status
