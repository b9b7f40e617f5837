#!/bin/sh
# Checks the Dockerfile's two stages as far as a machine without a Docker
# engine can: the build context .dockerignore leaves (measured, at most 32 MiB,
# and holding every COPY source); the build stage's COPY lines are copied into
# an empty folder and its cmake RUN line is run there as written, its install
# prefix moved under a temporary root (so a file the build needs but the image
# lacks, or a warning under Release, fails here); the runtime stage's
# COPY --from=build must bring trainscope-server and trainscope-collect to
# /usr/local/bin; every library they need must come from a package the runtime
# stage installs (or libc); the ENTRYPOINT's flags must start the server, and
# the HEALTHCHECK's command must answer 0 against it and 1 once it is gone.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
# the build context: the folder less .dockerignore's patterns (tar's anchored globs,
# where * also matches /, as Docker's ** does)
grep -v '^#' .dockerignore | grep -v '^$' >"$tmp/ignore"
# shellcheck disable=SC2046
tar -c --anchored --wildcards --exclude-from="$tmp/ignore" -f "$tmp/context.tar" $(ls -A)
context=$(($(stat -c %s "$tmp/context.tar") / 1048576))
echo "docker-check: build context $context MiB" >&2
[ "$context" -le 32 ] || { echo "docker-check: the build context is $context MiB (.dockerignore?)" >&2; exit 1; }
tar -tf "$tmp/context.tar" | sed 's|/$||' >"$tmp/context.list"
# build stage: COPY SRC... DEST (one folder or file per line here)
awk '/^FROM /{n++} n==1 && /^COPY /{for (i=2; i<NF; i++) print $i, $NF}' Dockerfile |
	while read -r src dest; do
		case $dest in */) mkdir -p "$tmp/src/$dest"; to="$tmp/src/$dest" ;;
		*) mkdir -p "$tmp/src/$(dirname "$dest")"; to="$tmp/src/$dest" ;; esac
		grep -qx "$src" "$tmp/context.list" || { echo "docker-check: COPY $src: not in the build context" >&2; exit 1; }
		cp -R "$src" "$to"
	done
# the image runs npm ci with the network; here, the packages already installed
[ -d web/node_modules ] && cp -R web/node_modules "$tmp/src/web/"
build=$(awk '/^FROM /{n++} n==1 && /^RUN cmake/{sub(/^RUN /, ""); l=$0; while (l ~ /\\$/) {sub(/\\$/, "", l); getline nx; l=l nx} print l}' Dockerfile)
[ -n "$build" ] || { echo "docker-check: no 'RUN cmake' line in the build stage" >&2; exit 1; }
# the image's root is $tmp/root here: cmake --install --prefix /opt/x goes to $tmp/root/opt/x
build=$(echo "$build" | sed "s|--prefix /|--prefix $tmp/root/|g")
echo "docker-check: $build" >&2
(cd "$tmp/src" && sh -c "$build" >"$tmp/build.log" 2>&1) || { tail -40 "$tmp/build.log" >&2; exit 1; }
# runtime stage: COPY --from=build SRC DEST, SRC in the build stage's root (/src is WORKDIR)
mkdir -p "$tmp/image"
awk '/^FROM /{n++} n==2 && /^COPY --from=build /{print $3, $4}' Dockerfile |
	while read -r src dest; do
		case $src in /src/*) from="$tmp/src/${src#/src/}" ;; *) from="$tmp/root$src" ;; esac
		[ -e "$from" ] || { echo "docker-check: COPY --from=build $src: the build stage made no such thing" >&2; exit 1; }
		mkdir -p "$tmp/image$dest"
		case $src in */) cp -R "$from". "$tmp/image$dest" ;; *) cp -R "$from" "$tmp/image$dest" ;; esac
	done
for b in trainscope-server trainscope-collect; do
	[ -x "$tmp/image/usr/local/bin/$b" ] || { echo "docker-check: the image has no /usr/local/bin/$b" >&2; exit 1; }
done
bin="$tmp/image/usr/local/bin/trainscope-server"
# runtime stage: the packages it installs, plus libc
pkgs=$(awk '/^FROM /{n++} n==2' Dockerfile | tr -s ' \\\n' '\n' | grep -E '^lib[a-z0-9.+-]+$' | grep -v -- '-dev$')
status=0
for lib in $(for b in "$bin" "$tmp/image/usr/local/bin/trainscope-collect"; do
	readelf -d "$b" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'; done | sort -u); do
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
# HEALTHCHECK ... CMD ["trainscope-server", "--listen", "127.0.0.1:8470", "--healthcheck"]:
# the same command, at the address the server above took
hc=$(awk '/^HEALTHCHECK /{l=$0; while (l ~ /\\$/) {sub(/\\$/, "", l); getline nx; l=l nx} print l}' Dockerfile |
	sed -n 's/.* CMD \[\(.*\)\]/\1/p' | tr -d '",')
addr=$(sed -n 's|.*listening on http://\([0-9.:]*\).*|\1|p' "$tmp/out")
case $hc in trainscope-server*) ;; *) echo "docker-check: no HEALTHCHECK CMD [\"trainscope-server\", ...]" >&2; exit 1 ;; esac
# shellcheck disable=SC2086
set -- $(echo "$hc" | cut -d' ' -f2- | sed "s|--listen [^ ]*|--listen $addr|")
"$bin" "$@" || { echo "docker-check: the HEALTHCHECK failed against the running server" >&2; status=1; }
if kill "$pid" 2>/dev/null && wait "$pid"; then :; else
	echo "docker-check: the ENTRYPOINT's server did not start and stop cleanly:" >&2
	cat "$tmp/out" >&2
	status=1
fi
if "$bin" "$@" 2>/dev/null; then
	echo "docker-check: the HEALTHCHECK passed with the server stopped" >&2
	status=1
fi
[ $status = 0 ] && echo "docker-check: ok (context, Release build from the image's files, both binaries, runtime libraries, entrypoint, healthcheck)" >&2
exit $status
