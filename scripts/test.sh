#!/bin/sh
# Builds and runs the whole test suite (unit + end to end) in build/;
# with SANITIZE=1, in build-asan/ with AddressSanitizer and UBSan.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
if [ "${SANITIZE:-0}" = 1 ]; then dir=build-asan; opts="-DSANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"; else dir=build; opts=""; fi
# shellcheck disable=SC2086
cmake -S . -B "$dir" $opts >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure
