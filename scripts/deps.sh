#!/bin/sh
# Installs, on Debian 12, the packages Trainscope builds and tests with,
# skipping those already there. Needs root (or sudo) only when something is missing.
set -eu
pkgs="build-essential cmake pkg-config libmicrohttpd-dev libsqlite3-dev libpq-dev zlib1g-dev \
libjansson-dev libyajl-dev libcurl4-openssl-dev check chromium python3 curl"
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
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
