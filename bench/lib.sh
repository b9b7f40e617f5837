# bench/lib.sh: what the benchmark scripts share. Sourced after the script
# sets BENCH (its name, for messages).
#   die MSG...      the message on stderr, exit 1
#   now             seconds since the epoch, to the nanosecond
#   calc EXPR FMT   python's format(EXPR, FMT)
#   wait_port DIR   waits (10 s at most) for the server SPID to print its
#                   port in DIR/server.out or DIR/server.err; sets PORT
die() { echo "$BENCH: $*" >&2; exit 1; }
now() { date +%s.%N; }
calc() { python3 -c "print(format($1, '$2'))"; }
wait_port() {
	PORT=
	for _ in $(seq 100); do
		PORT=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$1/server.out" "$1/server.err" |
			head -1)
		[ -n "$PORT" ] && return 0
		kill -0 "$SPID" 2>/dev/null || die "server exited: $(cat "$1/server.err")"
		sleep 0.1
	done
	die "server did not report its port"
}
