#!/usr/bin/env bash
# Installs the pinned real ACP agents and runs acpflow's end-to-end tests
# against them, offline and without real keys (see realagents_test.go).
# From anywhere: bash realagents/run.sh [extra go test flags]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/install.sh"
cd "$here/.."
go test -tags realagents ./realagents/ -v -count=1 -timeout 45m "$@"
