#!/bin/sh
# Builds and runs the whole test suite (unit + end to end, then the API's
# JSON Schemas against a live server, then the dashboards in headless
# chromium, screenshots in $dir/browser/) in build/, then the end-to-end suite,
# the schema walk and every answer again on PostgreSQL, then the Release build
# the Dockerfile makes (in build-release/, its unit suite run); with
# SANITIZE=1, in build-asan/ with AddressSanitizer and UBSan. ctest runs each Check
# suite as a test of its own, nproc at a time (each serves on a port and works in a folder
# of its own). Check's CK_EXCLUDE_TAGS, when set, applies to the pass in $dir: .ci/run
# leaves the suites tagged slow to its SANITIZE=1 pass.
set -eu
cd "$(dirname "$0")/.."
# what building and running need, and what only the tests use
scripts/deps.sh --test
# the layers of server/ include only what they may (store/ alone speaks SQL; parsers and analysis no HTTP)
scripts/layers.sh
# the fixtures (shared/fixtures, not in the repository) for cmake, the schema walk, the pages, answers.py
FIXTURES_DIR=$(scripts/fixtures.sh)
export FIXTURES_DIR
if [ "${SANITIZE:-0}" = 1 ]; then dir=build-asan; opts="-DSANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"; else dir=build; opts=""; fi
# shellcheck disable=SC2086
cmake -S . -B "$dir" -DBUILD_TESTS=ON -DFIXTURES_DIR="$FIXTURES_DIR" $opts >/dev/null
cmake --build "$dir" -j"$(nproc)"
# no circle among server/ files (who calls whom, read from the objects' symbols)
python3 scripts/cycles.py "$dir"
ctest --test-dir "$dir" -j"$(nproc)" --output-on-failure
# npm ci only when node_modules lacks this very lock (missing, or the lock changed)
lock=tests/schema/package-lock.json
cmp -s "$lock" tests/schema/node_modules/.installed-lock.json ||
	{ npm ci --prefix tests/schema --no-audit --no-fund && cp "$lock" tests/schema/node_modules/.installed-lock.json; }
node tests/schema/validate.mjs "$dir"
# web/node_modules (playwright-core) was installed by the build (scripts/web-build.sh)
BUILD_DIR="$dir" node --test --test-concurrency=1 tests/browser/pages.test.mjs tests/browser/compare.test.mjs \
	tests/browser/dashboards.test.mjs tests/browser/run_multi.test.mjs tests/browser/run_live.test.mjs \
	tests/browser/distributed.test.mjs tests/browser/formats.test.mjs tests/browser/gpu_runs.test.mjs \
	tests/browser/first_screen.test.mjs tests/browser/names.test.mjs tests/browser/capture.test.mjs
# the same suites on PostgreSQL (a throwaway cluster, scripts/pg.sh): every e2e test (those tagged sqlite
# read SQLite's file itself), the schema walk, and every GET answer on the fixtures byte for byte as SQLite's
if [ "${SANITIZE:-0}" != 1 ]; then
	pg=$(mktemp -d)
	trap 'scripts/pg.sh stop "$pg" 2>/dev/null || true; rm -rf "$pg"' EXIT
	uri=$(scripts/pg.sh start "$pg")
	TRAINSCOPE_TEST_PG=$pg CK_EXCLUDE_TAGS=sqlite ctest --test-dir "$dir" -R '^e2e\.' -j"$(nproc)" --output-on-failure
	SCHEMA_DB=$uri node tests/schema/validate.mjs "$dir"
	# answers.py wants an empty database: the schema walk's is dropped
	"$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/psql" -q -h "$pg" -U trainscope -d postgres \
		-c "DROP DATABASE trainscope WITH (FORCE)" -c "CREATE DATABASE trainscope"
	python3 scripts/answers.py "$pg/answers-sqlite" --server "$dir/trainscope-server"
	python3 scripts/answers.py "$pg/answers-pg" --server "$dir/trainscope-server" --db "$uri"
	diff -r "$pg/answers-sqlite" "$pg/answers-pg"
	echo "PostgreSQL: $(ls "$pg/answers-pg" | wc -l) answers byte-identical to SQLite's"
	scripts/pg.sh stop "$pg"
	rm -rf "$pg"
	trap - EXIT
fi
# the Release configuration users build (the Dockerfile's): -O3 finds warnings -O2 does not
if [ "${SANITIZE:-0}" != 1 ]; then
	cmake -S . -B build-release -DBUILD_TESTS=ON -DFIXTURES_DIR="$FIXTURES_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build-release -j"$(nproc)"
	# (the allocation-failure loops and the other suites tagged slow ran in build/ above, unless
	# CK_EXCLUDE_TAGS left them out, and run under ASan in CI)
	CK_EXCLUDE_TAGS=slow ctest --test-dir build-release -R '^unit\.' -j"$(nproc)" --output-on-failure
fi
