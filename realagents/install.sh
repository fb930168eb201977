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
# npm ci refuses this lock ("Missing: @teddyzhu/clipboard-darwin-arm64 …
# from lock file"): qwen-code names the platform packages of a dependency
# for every platform, and npm records only this one's. npm install takes
# the same pinned versions from the lock (package.json pins every agent
# exactly) and installs what is missing.
npm ci --ignore-scripts --no-audit --no-fund 2>/dev/null ||
  npm install --ignore-scripts --no-audit --no-fund
