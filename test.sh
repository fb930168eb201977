#!/usr/bin/env bash
# The tests of both modules: the core, then the Temporal module's in-memory
# and replay tests. Each runs whatever the other's outcome, and the script
# fails when either fails. Arguments go to both `go test` runs
# (./test.sh -count=1 runs them again even where a result is cached).
set -u
cd "$(dirname "$0")"
status=0
go test -timeout 30m "$@" ./... || status=1
(cd temporal && go test -timeout 30m "$@" ./...) || status=1
if [ "$status" -ne 0 ]; then
  echo "FAIL: the tests of at least one module failed (see above)" >&2
fi
exit "$status"
