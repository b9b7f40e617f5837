#!/bin/sh
# The layers of server/, checked by their #include lines (CI runs it):
#   store/      the only code that includes sqlite3.h, and store_int.h (its
#               files' shared structs and helpers: store.h is the interface)
#   ingest/     the format readers (trace, memory timeline, pickle, snapshot,
#               numbers, inflate): no store, pipeline, analysis, HTTP or
#               libmicrohttpd header, no SQLite
#   analysis/   pure computation: none of those either, and no parser
#   memmodel.h, canarymodel.h, event.h: the models the layers share; they include no layer
# Prints each include that breaks a rule and exits 1; 0 when none does.
set -eu
cd "$(dirname "$0")/../server"
bad=0
# what a file's #include lines name: "path:line: target"
includes() { grep -Hn '^[[:space:]]*#[[:space:]]*include' "$@" | sed -E 's/^([^:]+:[0-9]+):.*include[[:space:]]*[<"]([^>"]+)[>"].*/\1: \2/'; }
deny() {	# deny DESCRIPTION REGEX FILES...: no file's include may match REGEX
	what=$1 re=$2
	shift 2
	out=$(includes "$@" | grep -E ": ($re)\$" || true)
	if [ -n "$out" ]; then
		printf '%s\n' "$out" | sed "s|^|server/|; s|\$|  <- $what|" >&2
		bad=1
	fi
}
others=$(find . -name '*.[ch]' ! -path './store/*' | sed 's|^\./||')
# shellcheck disable=SC2086
deny "only store/ includes SQLite" 'sqlite3\.h' $others
# shellcheck disable=SC2086
deny "store_int.h is store/'s own: include store.h" '(store/)?store_int\.h' $others
http='microhttpd\.h|http\.h|handlers\.h|routes\.h|cache\.h|metrics\.h'
# shellcheck disable=SC2046
deny "parsers include no store, pipeline, analysis or HTTP header" \
	"store/.*|store\.h|evpack\.h|pipeline/.*|analysis/.*|$http" $(ls ingest/*.[ch])
# shellcheck disable=SC2046
deny "analysis includes no store, pipeline, parser or HTTP header" \
	"store/.*|store\.h|evpack\.h|pipeline/.*|ingest/.*|$http" $(ls analysis/*.[ch])
deny "the shared models include no layer" "store/.*|pipeline/.*|ingest/.*|analysis/.*|$http" \
	memmodel.h memmodel.c canarymodel.h canarymodel.c event.h
[ "$bad" = 0 ] && echo "layers: ok (store/, ingest/, analysis/, memmodel.h, canarymodel.h, event.h)"
exit "$bad"
