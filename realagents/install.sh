#!/usr/bin/env bash
# Installs the real ACP agents pinned in package.json / package-lock.json
# into realagents/node_modules, for `go test -tags realagents ./realagents/`.
# Needs node >= 20 and npm; reaches only the npm registry.
#
# --ignore-scripts: nothing the tests use needs an install script (codex-acp
# and opencode ship their binaries as platform packages, which the tests
# run directly; gemini's node-pty and keytar are optional), and skipping
# them keeps the install the same on every npm. claude-agent-acp and qwen
# declare node >= 22 and run on node 20 (measured).
set -euo pipefail
cd "$(dirname "$0")"
npm ci --ignore-scripts --no-audit --no-fund
