#!/bin/sh
# tests/demo.sh BUILD_DIR: scripts/demo.sh against a server with a write token, as ctest's
# "demo" runs it: without the token it exits 1 naming the 401; with it, 13 runs of
# tests/fixtures/gpu/ are listed (dist with 2 ranks, train with its 12 artifacts); run
# again, it exits 0 and uploads nothing new.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT INT TERM
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

token=demo-token-0123456789abcdef
echo "$token" >"$tmp/tokens"
"$build/trainscope-server" --listen 127.0.0.1:0 --db "$tmp/t.db" --token-file "$tmp/tokens" >"$tmp/server.out" 2>&1 &
pid=$!
i=0
until grep -q "listening on" "$tmp/server.out" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
url=$(sed -n 's|.*listening on \(http://[0-9.:]*\).*|\1|p' "$tmp/server.out")
[ -n "$url" ] || { cat "$tmp/server.out" >&2; exit 1; }
export TRAINSCOPE_URL="$url"

set +e
TRAINSCOPE_TOKEN= "$src/scripts/demo.sh" >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
[ $rc = 1 ] || fail "without the token: exit $rc, not 1"
grep -q "HTTP 401" "$tmp/err" || fail "without the token: no 401 said: $(cat "$tmp/err")"

TRAINSCOPE_TOKEN=$token "$src/scripts/demo.sh" >"$tmp/out" 2>"$tmp/err" || fail "with the token: exit $?: $(cat "$tmp/err")"
[ "$(grep -c "file(s)" "$tmp/out")" = 13 ] || fail "not one line per run: $(cat "$tmp/out")"
grep -q "open $url/" "$tmp/out" || fail "no page to open said"
runs=$(curl -fsS "$url/api/v1/runs")
for run in $(ls "$src/tests/fixtures/gpu"); do
	[ -d "$src/tests/fixtures/gpu/$run" ] || continue
	echo "$runs" | grep -q "\"name\":\"$run\"" || fail "run $run is not listed"
done
curl -fsS "$url/api/v1/runs/dist" | grep -q '"ranks":2' || fail "dist does not have 2 ranks"
curl -fsS "$url/api/v1/runs/train" | grep -q '"artifacts":12' || fail "train does not have its 12 artifacts"

TRAINSCOPE_TOKEN=$token "$src/scripts/demo.sh" >"$tmp/again" 2>"$tmp/err" || fail "again: exit $?: $(cat "$tmp/err")"
[ "$(grep -c ", 0 new" "$tmp/again")" = 13 ] || fail "again: something new: $(cat "$tmp/again")"

[ $fails = 0 ] || { echo "demo: $fails failure(s)" >&2; exit 1; }
echo "demo: ok (401 without the token, 13 runs with it, nothing new the second time)"
