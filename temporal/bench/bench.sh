#!/usr/bin/env bash
# The Temporal benchmark: a batch of N one-step runs on the demo agent,
# on a local dev server with two workers, beside `acpflow run --inputs`
# on the same machine, in one run; then the same batch with one worker
# killed half-way. Prints wall time, runs per second and CPU per run.
#
#   bash temporal/bench/bench.sh [N]        (default 200)
#
# ACPFLOW_TEMPORAL_DEVSERVER may name a built temporal/devserver binary;
# otherwise it is built (minutes, cold).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-200}
SLOTS=8 # acpflow --concurrency; two workers of 4
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; wait 2>/dev/null; rm -rf "$work"' EXIT

go build -o "$work/acpflow" ./cmd/acpflow
(cd temporal && go build -o "$work/acpflow-temporal" ./cmd/acpflow-temporal)
server=${ACPFLOW_TEMPORAL_DEVSERVER:-}
if [ -z "$server" ]; then
  (cd temporal/devserver && go build -o "$work/devserver" .)
  server=$work/devserver
fi

cat > "$work/one.yaml" <<'YAML'
name: one
inputs:
  n: {type: number, required: true}
agents:
  demo: {builtin: demo}
steps:
  - {id: hello, uses: acp-subagent, with: {agent: demo, prompt: "hello ${{ inputs.n }}"}}
YAML
for i in $(seq 1 "$N"); do echo "{\"n\": $i}"; done > "$work/inputs.jsonl"

# cpu PID...: the CPU seconds (user+system) the processes used so far.
cpu() {
  local ticks=0 t
  for p in "$@"; do
    t=$(awk '{print $14+$15+$16+$17}' "/proc/$p/stat" 2>/dev/null || echo 0)
    ticks=$((ticks + t))
  done
  echo "scale=3; $ticks / $(getconf CLK_TCK)" | bc
}
now() { date +%s.%N; }
report() { # name wall cpu
  printf '%-34s %7.2f s  %6.1f runs/s  %6.2f ms CPU/run\n' "$1" "$2" "$(echo "$N / $2" | bc -l)" "$(echo "$3 * 1000 / $N" | bc -l)"
}

echo "== acpflow run --inputs ($N runs, --concurrency $SLOTS)"
t0=$(now)
/usr/bin/time -f '%U %S' -o "$work/cli.time" "$work/acpflow" run "$work/one.yaml" --inputs "$work/inputs.jsonl" \
  --concurrency $SLOTS --state "$work/state.db" --output "$work/cli.jsonl" >/dev/null
t1=$(now)
cli_wall=$(echo "$t1 - $t0" | bc)
cli_cpu=$(awk '{print $1+$2}' "$work/cli.time")

port=$((20000 + RANDOM % 20000))
export TEMPORAL_ADDRESS=127.0.0.1:$port ACPFLOW_TEMPORAL_BLOBS=$work/blobs
"$server" -port "$port" 2>"$work/server.log" &
spid=$!
for _ in $(seq 1 300); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
sleep 1
"$work/acpflow-temporal" worker --concurrency 4 2>"$work/w1.log" & w1=$!
"$work/acpflow-temporal" worker --concurrency 4 2>"$work/w2.log" & w2=$!
sleep 1
base=$(cpu $spid $w1 $w2)

echo "== acpflow-temporal run --inputs ($N runs, 2 workers x 4, one dev server)"
t0=$(now)
/usr/bin/time -f '%U %S' -o "$work/tmp.time" "$work/acpflow-temporal" run "$work/one.yaml" --inputs "$work/inputs.jsonl" \
  --id bench --output "$work/tmp.jsonl" >/dev/null
t1=$(now)
tmp_wall=$(echo "$t1 - $t0" | bc)
tmp_cpu=$(echo "$(cpu $spid $w1 $w2) - $base + $(awk '{print $1+$2}' "$work/tmp.time")" | bc)

echo
printf '%-34s %9s  %12s  %16s\n' "" "wall" "throughput" "CPU (all processes)"
report "acpflow run --inputs" "$cli_wall" "$cli_cpu"
report "acpflow-temporal (server+workers)" "$tmp_wall" "$tmp_cpu"
echo "per-run overhead on Temporal: $(echo "($tmp_wall - $cli_wall) * $SLOTS * 1000 / $N" | bc -l | xargs printf '%.1f') ms of a slot's wall time, $(echo "($tmp_cpu - $cli_cpu) * 1000 / $N" | bc -l | xargs printf '%.2f') ms CPU"
echo "results: CLI $(grep -c '"status":"succeeded"' "$work/cli.jsonl") succeeded, Temporal $(grep -c '"status":"succeeded"' "$work/tmp.jsonl") succeeded"

echo
echo "== the same batch again (new ids), worker 1 killed (SIGKILL) after $((N / 4)) results"
: > "$work/killed.jsonl"
t0=$(now)
"$work/acpflow-temporal" run "$work/one.yaml" --inputs "$work/inputs.jsonl" --id killed --heartbeat 3s \
  --output "$work/killed.jsonl" >/dev/null 2>&1 & sub=$!
while [ "$(wc -l < "$work/killed.jsonl" 2>/dev/null || echo 0)" -lt $((N / 4)) ]; do sleep 0.02; done
before=$(wc -l < "$work/killed.jsonl")
kill -9 $w1
wait $w1 2>/dev/null || true
wait $sub
t1=$(now)
after=$(grep -c '"status":"succeeded"' "$work/killed.jsonl")
dups=$(grep -o '"n":[0-9]*' "$work/killed.jsonl" | sort | uniq -d | wc -l)
echo "killed after $before results; $after of $N runs succeeded, $dups inputs with two results, in $(echo "$t1 - $t0" | bc | xargs printf '%.2f') s (a moved step waits for the 3 s heartbeat timeout)"
