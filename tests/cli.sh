#!/bin/sh
# tests/cli.sh BUILD_DIR: the command lines of the two binaries, as ctest's "cli" runs it.
# - --version: one line "NAME X.Y.Z" or "NAME X.Y.Z (git HASH)", exit 0;
# - --help: the man page's sections, exit 0; every option it (and each collector
#   subcommand's --help) lists is in man/NAME.1, whose .TH names the same version;
#   an unknown flag: usage on stderr, exit 2;
# - cmake --install into a temporary prefix: both binaries (their --version run from
#   there), the man pages, and libtrainscope-cupti.so where the build has it;
# - the server: a port in use exits 1 with a clear message and leaves no database (nor
#   its folder) behind; a first start says "created database PATH, schema version N"
#   once and no "applied migration" line, a second start neither; --healthcheck answers
#   0 against it and 1 once it is gone.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT INT TERM
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

for name in trainscope-server trainscope-collect; do
	bin=$build/$name
	v=$("$bin" --version) || fail "$name --version exited $?"
	echo "$v" | grep -Eqx "$name [0-9]+\.[0-9]+\.[0-9]+( \(git [0-9a-f]{7,}\))?" || fail "$name --version: '$v'"
	[ "$(echo "$v" | wc -l)" = 1 ] || fail "$name --version: more than one line"
	"$bin" --help >"$tmp/help" || fail "$name --help exited $?"
	for sec in NAME SYNOPSIS DESCRIPTION OPTIONS EXAMPLES; do
		grep -qx "$sec" "$tmp/help" || fail "$name --help has no $sec section"
	done
	if [ "$name" = trainscope-collect ]; then
		for sub in upload watch run compare; do "$bin" $sub --help >>"$tmp/help" || fail "$name $sub --help exited $?"; done
	fi
	num=$(echo "$v" | cut -d' ' -f2)
	grep -q "^\.TH .* \"trainscope $num\"" "$src/man/$name.1" || fail "man/$name.1's .TH does not say trainscope $num"
	# roff writes a - as \-
	sed 's/\\-/-/g' "$src/man/$name.1" >"$tmp/man"
	opts=$(grep -Eo -- '(^|[[ ])--[a-z][a-z-]*' "$tmp/help" | sed 's/^[[ ]//' | sort -u)
	[ "$(echo "$opts" | wc -l)" -ge 4 ] || fail "$name: too few options found in --help: $opts"
	for o in $opts; do
		grep -Eq -- "$o([^a-z-]|\$)" "$tmp/man" || fail "$name: $o is in --help but not in man/$name.1"
	done
	set +e
	"$bin" --no-such-flag >"$tmp/out" 2>"$tmp/err"
	rc=$?
	set -e
	[ $rc = 2 ] || fail "$name --no-such-flag exited $rc, not 2"
	grep -q "usage: $name" "$tmp/err" || fail "$name --no-such-flag: no usage on stderr"
	[ ! -s "$tmp/out" ] || fail "$name --no-such-flag wrote to stdout"
done

# cmake --install
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || fail "cmake --install exited $?"
for name in trainscope-server trainscope-collect; do
	"$tmp/prefix/bin/$name" --version >/dev/null || fail "installed $name --version"
	[ -f "$tmp/prefix/share/man/man1/$name.1" ] || fail "no installed man page for $name"
done
if [ -f "$build/libtrainscope-cupti.so" ]; then
	[ -f "$tmp/prefix/lib/libtrainscope-cupti.so" ] || fail "libtrainscope-cupti.so was built but not installed"
fi

# the server's start
srv=$build/trainscope-server
mkdir "$tmp/run" && cd "$tmp/run"
"$srv" --listen 127.0.0.1:0 --db first/x.db >"$tmp/first.out" 2>&1 &
pid=$!
i=0
until grep -q "listening on" "$tmp/first.out" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
addr=$(sed -n 's|.*listening on http://\([0-9.:]*\).*|\1|p' "$tmp/first.out")
[ -n "$addr" ] || { cat "$tmp/first.out" >&2; fail "the server did not start"; exit 1; }
[ "$(grep -c "created database first/x.db, schema version [0-9]" "$tmp/first.out")" = 1 ] ||
	fail "a first start did not say 'created database first/x.db, schema version N' once: $(cat "$tmp/first.out")"
! grep -q "applied migration" "$tmp/first.out" || fail "a first start logged each migration at info"
"$srv" --listen "$addr" --healthcheck 2>"$tmp/err" || fail "--healthcheck of a running server: $(cat "$tmp/err")"

set +e
"$srv" --listen "$addr" --db second/y.db >"$tmp/second.out" 2>&1
rc=$?
set -e
[ $rc = 1 ] || fail "a port in use exited $rc, not 1"
grep -q "cannot listen on $addr: Address already in use" "$tmp/second.out" ||
	fail "a port in use: no clear message: $(cat "$tmp/second.out")"
[ ! -e second ] || fail "a port in use left $(find second | tr '\n' ' ')behind"

kill "$pid" && wait "$pid" || fail "the server did not stop cleanly"
pid=""
set +e
"$srv" --listen "$addr" --healthcheck 2>/dev/null
rc=$?
set -e
[ $rc = 1 ] || fail "--healthcheck of a stopped server exited $rc, not 1"
"$srv" --listen 127.0.0.1:0 --db first/x.db >"$tmp/again.out" 2>&1 &
pid=$!
i=0
until grep -q "listening on" "$tmp/again.out" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
kill "$pid" && wait "$pid" || fail "the second start did not stop cleanly"
pid=""
! grep -Eq "created database|migrated database" "$tmp/again.out" || fail "a second start said: $(cat "$tmp/again.out")"

[ $fails = 0 ] || { echo "cli: $fails failure(s)" >&2; exit 1; }
echo "cli: ok (--version, --help against man/, unknown flags, cmake --install, bind before the database, one schema line, --healthcheck)"
