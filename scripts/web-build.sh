#!/bin/sh
# Builds the dashboards for the server (run by CMake): installs web/'s npm
# packages exactly as locked (npm ci, only when node_modules lacks this very
# lock), then bundles web/src into web/dist and the C table OUT.c.
#   scripts/web-build.sh OUT.c
set -eu
cd "$(dirname "$0")/../web"
cmp -s package-lock.json node_modules/.installed-lock.json ||
	{ npm ci --no-audit --no-fund --prefer-offline && cp package-lock.json node_modules/.installed-lock.json; }
node build.mjs "$1"
