package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/otlpreceiver"
)

// BenchmarkRunAndItsCollector times `acpflow run` of a one-step workflow
// on the test agent (cmd-ms: the command; run-ms: the run, as its result
// says), side by side: no traces, a live collector, a closed port, and a
// collector that accepts and never answers (docs/traces.md
// gives the figures). Every run must succeed: a collector changes
// nothing of it but, at worst, trace.ShutdownTimeout at its end.
//
//	go test ./cmd/acpflow -run '^$' -bench RunAndItsCollector -benchtime 5x
func BenchmarkRunAndItsCollector(b *testing.B) {
	live, err := otlpreceiver.StartHTTP()
	if err != nil {
		b.Fatal(err)
	}
	defer live.Close()
	silent, err := otlpreceiver.StartSilent()
	if err != nil {
		b.Fatal(err)
	}
	defer silent.Close()
	closed, err := otlpreceiver.ClosedURL()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	wf := filepath.Join(dir, "wf.yaml")
	body := "name: bench\nagents:\n  a:\n    command: " + testAgent + "\nsteps:\n  - {id: s, uses: acp-subagent, with: {agent: a, prompt: go}}\n"
	if err := os.WriteFile(wf, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	variants := []struct{ name, endpoint string }{
		{"none", ""}, {"live", live.URL}, {"closed", closed}, {"silent", silent.URL},
	}
	// The variants take turns in each iteration, so that a change in the
	// machine's load falls on all of them alike.
	cmdNS, runMS := make([]int64, len(variants)), make([]int64, len(variants))
	for b.Loop() {
		for i, v := range variants {
			took, ran := timedRun(b, wf, dir, v.endpoint)
			cmdNS[i] += took.Nanoseconds()
			runMS[i] += ran
		}
	}
	for i, v := range variants {
		b.ReportMetric(float64(cmdNS[i])/1e6/float64(b.N), v.name+"-cmd-ms/op")
		b.ReportMetric(float64(runMS[i])/float64(b.N), v.name+"-run-ms/op")
	}
	assertNoProcessFrom(b, binDir)
}

// timedRun runs `acpflow run wf` with OTEL_EXPORTER_OTLP_ENDPOINT set to
// endpoint ("": no traces) and returns how long the command took and the
// run's duration_ms as its result says.
func timedRun(b *testing.B, wf, dir, endpoint string) (time.Duration, int64) {
	out := filepath.Join(dir, "out.json")
	os.Remove(out)
	cmd := exec.Command(acpflowBin, "run", wf, "--state", filepath.Join(dir, "state.db"), "--workspace", dir, "--output", out)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint)
	began := time.Now()
	if text, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("endpoint %q: %v\n%s", endpoint, err, text)
	}
	took := time.Since(began)
	var res struct {
		DurationMS int64 `json:"duration_ms"`
	}
	if text, _ := os.ReadFile(out); json.Unmarshal(text, &res) != nil {
		b.Fatalf("endpoint %q: result %q", endpoint, text)
	}
	return took, res.DurationMS
}
