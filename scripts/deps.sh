#!/bin/sh
# scripts/deps.sh [--test]: installs, on Debian 12, the packages Trainscope builds and runs
# with (a compiler, cmake, pkg-config, the -dev libraries the server and collector link,
# node and npm for the dashboards' bundle, curl), skipping those already there; with
# --test, also what only the tests use (Check, yajl, chromium for tests/browser, python3
# for scripts/answers.py, PostgreSQL's binaries for scripts/pg.sh), as scripts/test.sh asks.
# Needs root (or sudo) only when something is missing.
set -eu
pkgs="build-essential cmake pkg-config libmicrohttpd-dev libsqlite3-dev libpq-dev zlib1g-dev libdeflate-dev libzstd-dev \
libjansson-dev libcurl4-openssl-dev ca-certificates curl"
case "${1:-}" in
"") ;;
--test) pkgs="$pkgs check libyajl-dev chromium python3 postgresql" ;;
*) echo "usage: scripts/deps.sh [--test]" >&2; exit 2 ;;
esac
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# node and npm build the dashboards (web/; tests/schema too): one installed some other
# way (NodeSource, nvm) will do
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
echo "installing:$missing" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
# postgresql: its binaries only (scripts/pg.sh runs throwaway clusters); no system cluster, no service
case " $missing " in *" postgresql "*)
	$sudo mkdir -p /etc/postgresql-common/createcluster.d
	echo "create_main_cluster = false" | $sudo tee /etc/postgresql-common/createcluster.d/trainscope.conf >/dev/null ;;
esac
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
