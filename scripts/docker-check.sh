#!/bin/sh
# Checks the Dockerfile's two stages as far as a machine without a Docker
# engine can: the build stage's COPY lines are copied into an empty folder
# and its cmake RUN line is run there as written (so a file the build needs
# but the image lacks, or a warning under Release, fails here); then every
# library the server needs must come from a package the runtime stage
# installs (or libc), and the ENTRYPOINT's flags must start the server.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# build stage: COPY SRC... DEST (one folder or file per line here)
awk '/^FROM /{n++} n==1 && /^COPY /{for (i=2; i<NF; i++) print $i, $NF}' Dockerfile |
	while read -r src dest; do
		case $dest in */) mkdir -p "$tmp/src/$dest"; to="$tmp/src/$dest" ;;
		*) mkdir -p "$tmp/src/$(dirname "$dest")"; to="$tmp/src/$dest" ;; esac
		cp -R "$src" "$to"
	done
# the image runs npm ci with the network; here, the packages already installed
[ -d web/node_modules ] && cp -R web/node_modules "$tmp/src/web/"
build=$(awk '/^FROM /{n++} n==1 && /^RUN cmake/{sub(/^RUN /, ""); l=$0; while (l ~ /\\$/) {sub(/\\$/, "", l); getline nx; l=l nx} print l}' Dockerfile)
[ -n "$build" ] || { echo "docker-check: no 'RUN cmake' line in the build stage" >&2; exit 1; }
echo "docker-check: $build" >&2
(cd "$tmp/src" && sh -c "$build" >"$tmp/build.log" 2>&1) || { tail -40 "$tmp/build.log" >&2; exit 1; }
bin="$tmp/src/build/trainscope-server"
# runtime stage: the packages it installs, plus libc
pkgs=$(awk '/^FROM /{n++} n==2' Dockerfile | tr -s ' \\\n' '\n' | grep -E '^lib[a-z0-9.+-]+$' | grep -v -- '-dev$')
status=0
for lib in $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
	path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64/ {print $NF; exit}')
	pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1)
	case " libc6 $(echo "$pkgs" | tr '\n' ' ') " in
	*" $pkg "*) ;;
	*) echo "docker-check: $lib (package ${pkg:-unknown}) is not installed by the runtime stage" >&2; status=1 ;;
	esac
done
# ENTRYPOINT ["trainscope-server", "--listen", "0.0.0.0:8470", "--db", "/data/trainscope.db"]:
# the same flags, on a free port and a temporary database
flags=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]/\1/p' Dockerfile | tr -d '",' | cut -d' ' -f2-)
echo "$flags" | grep -q -- '--listen' || { echo "docker-check: ENTRYPOINT has no --listen" >&2; exit 1; }
# shellcheck disable=SC2086
set -- $(echo "$flags" | sed "s|--listen [^ ]*|--listen 127.0.0.1:0|; s|--db [^ ]*|--db $tmp/t.db|")
"$bin" "$@" >"$tmp/out" 2>&1 &
pid=$!
i=0
until grep -q "127.0.0.1:" "$tmp/out" 2>/dev/null || [ $i -ge 50 ]; do sleep 0.1; i=$((i + 1)); done
if kill "$pid" 2>/dev/null && wait "$pid"; then :; else
	echo "docker-check: the ENTRYPOINT's server did not start and stop cleanly:" >&2
	cat "$tmp/out" >&2
	status=1
fi
[ $status = 0 ] && echo "docker-check: ok (Release build from the image's files, runtime libraries, entrypoint)" >&2
exit $status
