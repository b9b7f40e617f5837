#!/bin/sh
# The test suite under valgrind's memcheck, in build/: every Check unit suite
# but the allocation-failure one (tagged slow: thousands of databases; LSan
# checks it in the ASan pass), then the server itself under memcheck for the
# API validator's whole walk (every upload kind, every endpoint, the error
# answers, compare, a clean SIGTERM stop). Any memory error or definite leak
# fails it.
set -eu
cd "$(dirname "$0")/.."
scripts/deps.sh
command -v valgrind >/dev/null || apt-get install -y -qq --no-install-recommends valgrind >/dev/null
cmake -S . -B build >/dev/null
cmake --build build -j"$(nproc)"
vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite"
# Check forks a child per test: memcheck follows it. Its timeouts (4 s a test unless set) are
# for native speed: memcheck runs 20-50x slower (the sort test's 30,000-element patterns ran out
# of 4 s on a busy 2-core machine)
CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10} CK_EXCLUDE_TAGS=slow $vg --trace-children=yes build/tests/check_unit
SERVER_WRAPPER="$vg" node tests/schema/validate.mjs build
