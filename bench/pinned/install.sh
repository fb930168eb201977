#!/usr/bin/env bash
# Installs the claude adapter that realagents/ pinned before today's
# (@zed-industries/claude-agent-acp 0.23.1) into bench/pinned/node_modules,
# so that `go run ./bench -only real` runs it beside today's
# (realagents/install.sh) with the same preset and shows both in one table
# (issue 28). codex-acp 0.16.0 is left out: it runs only with the codex
# preset acpflow had then (auth id codex-api-key, -c approval_policy and
# sandbox_mode args, a prompt rule in HOME for the commands it runs unasked),
# not with today's. Needs node >= 20 and npm; reaches only the npm registry.
set -euo pipefail
cd "$(dirname "$0")"
npm install --ignore-scripts --no-audit --no-fund
