#!/bin/sh
# Installs, on Debian 12, the packages Trainscope builds and tests with,
# skipping those already there. Needs root (or sudo) only when something is missing.
set -eu
pkgs="build-essential cmake pkg-config libmicrohttpd-dev libsqlite3-dev libpq-dev zlib1g-dev \
libjansson-dev libyajl-dev libcurl4-openssl-dev check chromium python3 curl postgresql"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
# chromium runs tests/browser; node and npm build the dashboards (web/) and run
# tests/schema: one installed some other way (NodeSource, nvm) will do
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
