package main

// End to end: one OpenTelemetry trace per run (SPEC §10 "Traces", issue
// 39), through the real binary, read by an OTLP receiver made from the
// protobuf definitions (internal/otlpreceiver), not through the SDK.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/otlpreceiver"
	"github.com/acpflow/acpflow/runs/trace"
)

// traceCanary is a secret in acpflow's environment (a credential's name)
// that the agent's tool calls name: nothing of it may reach a collector.
const traceCanary = "tr-canary-5c1d9b7e3a"

// tracedRun runs, in a sandbox world, one step whose agent asks for a
// command, runs a delete unasked, and asks the proxy for a host its
// network list does not hold; the outer policy file's telemetry: sends
// the trace to endpoint, with content.
func tracedRun(t *testing.T, w *sandboxWorld, endpoint string) sandboxRun {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	writeFile(t, filepath.Dir(policy), "policy.yaml", fmt.Sprintf(
		"telemetry:\n  endpoint: %s\n  content: true\n  trace-url: http://traces.example/trace/{trace_id}\n", endpoint))
	w.env = []string{"E2E_TRACE_TOKEN=" + traceCanary}
	// The ask is rejected; the unasked call is recorded, and the step
	// goes on to its try.
	w.policies = "permission: reject\nunasked: record"
	return w.run(t, fmt.Sprintf("sandbox:\n  network: [%q]", w.listedAddr()), []string{"--policy", policy},
		"-announce-first", "-permission=execute:echo ${{ env.E2E_TRACE_TOKEN }}", "-unasked=delete:/tmp/"+traceCanary, "proxy:"+w.unlistedAddr())
}

func TestARunExportsOneTraceWithItsDecisionsAndRefusals(t *testing.T) {
	w := newSandboxWorld(t)
	rcv, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	s := tracedRun(t, w, rcv.URL)
	if strings.Contains(s.r.stderr, "traces:") {
		t.Errorf("a live collector, yet a warning: %s", s.r.stderr)
	}
	id := runID(t, s.out)
	spans := rcv.Spans()
	if len(spans) == 0 {
		t.Fatalf("the collector got no span; stderr:\n%s", s.r.stderr)
	}
	traceID := spans[0].TraceID
	byID := map[string]otlpreceiver.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
		if sp.TraceID != traceID {
			t.Errorf("span %q is in trace %s, the run's first in %s: one run, one trace", sp.Name, sp.TraceID, traceID)
		}
	}
	// Each of these is below the run's span, through the parents named.
	for name, path := range map[string][]string{
		"permission":     {"execute_tool execute", "invoke_agent testagent", "attempt 1", "step s", "run sandbox"},
		"unasked":        {"execute_tool delete", "invoke_agent testagent", "attempt 1", "step s", "run sandbox"},
		"sandbox.denied": {"step s", "run sandbox"},
		"agent.start":    {"attempt 1", "step s", "run sandbox"},
	} {
		sp, ok := findSpan(spans, name)
		if !ok {
			t.Errorf("no %q span; spans: %v", name, spanNames(spans))
			continue
		}
		for _, want := range path {
			parent, ok := byID[sp.ParentID]
			if !ok || parent.Name != want {
				t.Errorf("%q: the parent of %q is %q, want %q", name, sp.Name, parent.Name, want)
				break
			}
			sp = parent
		}
		if sp.ParentID != "" {
			t.Errorf("%q: the run's span has a parent %s", name, sp.ParentID)
		}
	}
	if perm, _ := findSpan(spans, "permission"); perm.Attrs["acpflow.permission.decision"] == nil || perm.Attrs["acpflow.permission.layer"] != "workflow" {
		t.Errorf("the permission span lacks its decision and layer: %v", perm.Attrs)
	}
	if den, _ := findSpan(spans, "sandbox.denied"); den.Attrs["acpflow.sandbox.target"] != w.unlistedAddr() {
		t.Errorf("the sandbox.denied span: %v, want the unlisted host %s", den.Attrs, w.unlistedAddr())
	}
	if run, _ := findSpan(spans, "run sandbox"); run.Attrs["acpflow.run.id"] != id {
		t.Errorf("the run's span names run %v, want %s", run.Attrs["acpflow.run.id"], id)
	}
	js := rcv.JSON()
	if strings.Contains(string(js), traceCanary) {
		t.Errorf("the canary secret reached the collector")
	}
	if !strings.Contains(string(js), "echo [redacted]") {
		t.Errorf("content: true, yet the asked command's title is not in the trace (scrubbed)")
	}
	// show names the trace, linked by the policy's template.
	shown := acpflowEnv(t, w.ws, nil, nil, "show", id, "--state", s.state)
	if want := "trace:     " + traceID; !strings.Contains(shown.stdout, want) {
		t.Errorf("show lacks %q:\n%s", want, shown.stdout)
	}
	var detail map[string]any
	js2 := acpflowEnv(t, w.ws, nil, nil, "show", id, "--json", "--state", s.state).stdout
	if json.Unmarshal([]byte(js2), &detail); detail["trace_id"] != traceID {
		t.Errorf("show --json: trace_id = %v, want %s", detail["trace_id"], traceID)
	}
}

// findSpan is the first span named name.
func findSpan(spans []otlpreceiver.Span, name string) (otlpreceiver.Span, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return otlpreceiver.Span{}, false
}

func spanNames(spans []otlpreceiver.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// A collector that is down leaves the run's result as it is without
// one, costs it no more than trace.ShutdownTimeout, and is said once.
func TestADeadCollectorLeavesTheRunsResultAlone(t *testing.T) {
	w := newSandboxWorld(t)
	rcv, err := otlpreceiver.StartHTTP()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	closed, err := otlpreceiver.ClosedURL()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	live := tracedRun(t, w, rcv.URL)
	liveTook := time.Since(began)
	began = time.Now()
	dead := tracedRun(t, w, closed)
	deadTook := time.Since(began)
	t.Logf("live collector: %s; closed port: %s", liveTook, deadTook)
	if live.r.code != dead.r.code {
		t.Errorf("exit %d with a live collector, %d with a closed port", live.r.code, dead.r.code)
	}
	for _, k := range []string{"status", "output", "error", "stop_reason"} {
		if fmt.Sprint(live.step[k]) != fmt.Sprint(dead.step[k]) {
			t.Errorf("the step's %s: %v with a live collector, %v with a closed port", k, live.step[k], dead.step[k])
		}
	}
	if deadTook > liveTook+trace.ShutdownTimeout {
		t.Errorf("a closed port cost %s against %s: more than the shutdown timeout %s", deadTook, liveTook, trace.ShutdownTimeout)
	}
	if n := strings.Count(dead.r.stderr, "spans were not exported to "+closed); n != 1 {
		t.Errorf("the loss is said %d times, want once:\n%s", n, dead.r.stderr)
	}
	if _, err := os.Stat(dead.out); err != nil {
		t.Errorf("no result with a closed port: %v", err)
	}
}

// A batch's runs export a trace each, carrying the batch's id, over gRPC
// when the variables say so; a model call through the gateway is a
// GenAI client span with its model and tokens, and the provider key is
// nowhere in the trace.
func TestABatchThroughAGatewayExportsATracePerRun(t *testing.T) {
	rcv, err := otlpreceiver.StartGRPC()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	dir := t.TempDir()
	key := "sk-canary-" + randomMark()
	prov := startProvider(t, messagesAnswer("ok", 120, 30))
	wf := gatewayWorkflow(t, dir, prov.URL, "inputs:\n  n: {type: number}\n", "-no-chunks", "-call-model", "1")
	inputs := filepath.Join(dir, "in.jsonl")
	writeFile(t, dir, "in.jsonl", "{\"n\": 1}\n{\"n\": 2}\n")
	r := acpflowEnv(t, dir, map[string]string{"GW_TEST_KEY": key, "OTEL_EXPORTER_OTLP_ENDPOINT": rcv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, nil,
		"run", wf, "--inputs", inputs, "--state", filepath.Join(dir, "state.db"), "--workspace", dir)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	runsOf := map[string]string{} // trace id → run id
	var batch string
	for _, s := range rcv.Spans() {
		switch {
		case s.Name == "run gw":
			runsOf[s.TraceID], _ = s.Attrs["acpflow.run.id"].(string)
			if b, _ := s.Attrs["acpflow.batch.id"].(string); b == "" || batch != "" && b != batch {
				t.Errorf("run span %v: want the one batch's id", s.Attrs)
			} else {
				batch = b
			}
		case strings.HasPrefix(s.Name, "chat "):
			if s.Kind != 3 /* client */ || s.Attrs["gen_ai.system"] != "anthropic" || s.Attrs["gen_ai.request.model"] == "" ||
				s.Attrs["gen_ai.usage.input_tokens"] != int64(120) || s.Attrs["gen_ai.usage.output_tokens"] != int64(30) {
				t.Errorf("model span %q: kind %v, %v", s.Name, s.Kind, s.Attrs)
			}
		}
	}
	if len(runsOf) != 2 {
		t.Errorf("%d traces, want one per line: %v", len(runsOf), runsOf)
	}
	if strings.Contains(string(rcv.JSON()), key) {
		t.Errorf("the provider key reached the collector")
	}
	// The batch's record names each run's trace.
	shown := acpflowEnv(t, dir, nil, nil, "show", batch, "--json", "--state", filepath.Join(dir, "state.db"))
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(shown.stdout), "\n") {
		var run struct {
			RunID   string `json:"run_id"`
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &run); err != nil {
			t.Fatalf("show %s --json: %q: %v", batch, line, err)
		}
		if n++; runsOf[run.TraceID] != run.RunID {
			t.Errorf("run %s: trace_id %q, whose run span names run %q", run.RunID, run.TraceID, runsOf[run.TraceID])
		}
	}
	if n != 2 {
		t.Errorf("show %s --json: %d runs, want 2:\n%s", batch, n, shown.stdout)
	}
}
