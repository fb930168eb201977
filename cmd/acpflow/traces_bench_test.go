package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/acpflow/acpflow/internal/otlpreceiver"
)

// BenchmarkRunAndItsCollector times `acpflow run` of a one-step workflow
// on the test agent, side by side: no traces, a live collector, a closed
// port, and a collector that accepts and never answers (docs/traces.md
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
	for _, c := range []struct{ name, endpoint string }{
		{"no traces", ""}, {"live collector", live.URL}, {"closed port", closed}, {"silent collector", silent.URL},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command(acpflowBin, "run", wf, "--state", filepath.Join(dir, "state.db"), "--workspace", dir)
				cmd.Env = append(os.Environ(), "NO_COLOR=1", "OTEL_EXPORTER_OTLP_ENDPOINT="+c.endpoint)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%s: %v\n%s", c.name, err, out)
				}
			}
		})
	}
	assertNoProcessFrom(b, binDir)
}
