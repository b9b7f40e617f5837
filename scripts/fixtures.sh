#!/bin/sh
# Prints the folder of the test fixtures (../shared/fixtures, not in the repository):
# $FIXTURES_DIR when set; else shared/fixtures beside this checkout; else, for a clone of a
# local checkout (git clone /work/main /tmp/x), shared/fixtures beside the checkout it was
# cloned from. Exits 1, with where it looked, when none has traces/.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${FIXTURES_DIR:-}" ]; then
	set -- "$FIXTURES_DIR"
else
	set -- "$root/../shared/fixtures"
	origin=$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)
	case $origin in
	/*) set -- "$@" "$origin/../shared/fixtures" ;;
	file://*) set -- "$@" "${origin#file://}/../shared/fixtures" ;;
	esac
fi
for d in "$@"; do
	[ -d "$d/traces" ] && { (cd "$d" && pwd); exit 0; }
done
echo "fixtures: none at $* (set FIXTURES_DIR, or put shared/ beside the checkout)" >&2
exit 1
