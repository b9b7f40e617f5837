#!/bin/sh
# A throwaway PostgreSQL for tests and benchmarks: Debian's postgresql
# binaries, a cluster in DIR, listening only on a Unix socket in DIR, run as an
# unprivileged user (nobody when started by root), never as a system service.
#
#   scripts/pg.sh start DIR   initdb if needed, start; prints the libpq URI
#   scripts/pg.sh stop DIR    stop it (DIR is left for the caller to remove)
set -eu
cmd=${1:?start or stop} dir=${2:?a directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/pg_ctl" ] || { echo "pg.sh: no PostgreSQL server (apt-get install postgresql)" >&2; exit 1; }
as() {	# run as the cluster's owner
	if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi
}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
[ "$(id -u)" = 0 ] && chown nobody "$dir"
cd "$dir"	# the owner may not enter the caller's folder
case $cmd in
start)
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		as "$bin/initdb" -D "$dir/data" -A trust -U trainscope -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; exit 1; }
	fi
	as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-k $dir -h '' -c synchronous_commit=off -c max_connections=200" \
		start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
	as "$bin/createdb" -h "$dir" -U trainscope trainscope 2>/dev/null || true
	echo "postgresql:///trainscope?host=$dir&user=trainscope"
	;;
stop)
	as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
	;;
*)
	echo "pg.sh: start or stop" >&2
	exit 2
	;;
esac
