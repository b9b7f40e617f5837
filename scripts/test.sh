#!/bin/sh
# Builds and runs the whole test suite (unit + end to end, then the API's
# JSON Schemas against a live server, then the dashboards in headless
# chromium, screenshots in $dir/browser/) in build/, then the Release build
# the Dockerfile makes (in build-release/, its unit suite run); with
# SANITIZE=1, in build-asan/ with AddressSanitizer and UBSan.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
# the layers of server/ include only what they may (store/ alone speaks SQL; parsers and analysis no HTTP)
scripts/layers.sh
if [ "${SANITIZE:-0}" = 1 ]; then dir=build-asan; opts="-DSANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"; else dir=build; opts=""; fi
# shellcheck disable=SC2086
cmake -S . -B "$dir" $opts >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure
# npm ci only when node_modules lacks this very lock (missing, or the lock changed)
lock=tests/schema/package-lock.json
cmp -s "$lock" tests/schema/node_modules/.installed-lock.json ||
	{ npm ci --prefix tests/schema --no-audit --no-fund && cp "$lock" tests/schema/node_modules/.installed-lock.json; }
node tests/schema/validate.mjs "$dir"
# web/node_modules (playwright-core) was installed by the build (scripts/web-build.sh)
BUILD_DIR="$dir" node --test --test-concurrency=1 tests/browser/pages.test.mjs tests/browser/compare.test.mjs \
	tests/browser/dashboards.test.mjs tests/browser/run_multi.test.mjs tests/browser/run_live.test.mjs \
	tests/browser/distributed.test.mjs tests/browser/formats.test.mjs
# the Release configuration users build (the Dockerfile's): -O3 finds warnings -O2 does not
if [ "${SANITIZE:-0}" != 1 ]; then
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build-release -j"$(nproc)"
	# (the allocation-failure loops, tagged slow, ran in build/ above and run under ASan in CI)
	CK_EXCLUDE_TAGS=slow ctest --test-dir build-release -R unit --output-on-failure
fi
