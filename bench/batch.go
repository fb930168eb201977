package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// Batch sizes: as the issue asks, 1000 one-step runs at concurrency 8.
const (
	batchRuns        = 1000
	batchConcurrency = 8
	batchRepeats     = 3
)

// batchThroughput runs 1000 one-step runs through `acpflow run --inputs`
// at --concurrency 8 beside the bare SDK client doing the same 1000 turns
// from 8 goroutines, interleaved, and measures what the run store costs a
// run by replaying a run's store writes alone.
func batchThroughput(b *bench) *section {
	wf := b.workflow("batch.yaml", `name: batch
agents:
  fast: {command: %s}
steps:
  - {id: one, uses: acp-subagent, with: {agent: fast, prompt: hello}}
`, b.testagent)
	inputs := filepath.Join(b.dir, "batch.jsonl")
	check(os.WriteFile(inputs, []byte(strings.Repeat("{}\n", batchRuns)), 0o644))
	bare := &variant{name: fmt.Sprintf("bare SDK loop, %d goroutines", batchConcurrency),
		cmd: command{argv: []string{b.bareclient, "-n", fmt.Sprint(batchRuns), "-c", fmt.Sprint(batchConcurrency), "--", b.testagent}, dir: b.dir}}
	flow := &variant{name: fmt.Sprintf("acpflow run --inputs, --concurrency %d", batchConcurrency)}
	for i := 0; i < batchRepeats; i++ {
		bare.samples = append(bare.samples, bare.cmd.mustMeasure())
		state := filepath.Join(b.dir, fmt.Sprintf("batch-%d.db", i)) // a fresh store each time
		flow.cmd = command{argv: []string{b.acpflow, "run", wf, "--inputs", inputs, "--concurrency", fmt.Sprint(batchConcurrency),
			"--workspace", b.dir, "--state", state}, dir: b.dir}
		flow.samples = append(flow.samples, flow.cmd.mustMeasure())
	}
	perRun := storeCostPerRun(b.dir)

	sec := &section{title: "Batch throughput"}
	w := &sec.body
	fmt.Fprintf(w, "%d one-step runs against the no-delay agent, %d at once; median of %d, interleaved.\n",
		batchRuns, batchConcurrency, batchRepeats)
	fmt.Fprintf(w, "CPU includes the agents (reaped by the client); peak RSS is the client's.\n\n")
	t := newTable("client", "wall", "runs/s", "CPU per run", "peak RSS", "throughput vs bare")
	bw := median(bare.samples, wallOf)
	for _, v := range []*variant{bare, flow} {
		wall := median(v.samples, wallOf)
		t.row(v.name, ms(wall), fmt.Sprintf("%.0f", batchRuns/(wall/1e9)),
			fmt.Sprintf("%.2f ms", median(v.samples, cpuMs)/batchRuns/1e6), mb(median(v.samples, rssKiB)),
			fmt.Sprintf("%.0f%%", 100*bw/wall))
	}
	t.write(w)
	fmt.Fprintf(w, "\nThe run store's share: the writes of one one-step run (create run, step started, child\n")
	fmt.Fprintf(w, "started, %d events, child ended, step ended, finish run), replayed alone on a fresh store:\n", eventsPerRun)
	fmt.Fprintf(w, "**%s per run** (median of %d).\n", perRun, storeReplays)

	ratio := bw / median(flow.samples, wallOf)
	sec.target("batch throughput ≥ 60% of the bare loop's", fmt.Sprintf("%.0f%%", 100*ratio), ratio >= 0.6)
	rss := median(flow.samples, rssKiB) / 1024
	sec.target("acpflow peak RSS in the batch ≤ 60 MB", fmt.Sprintf("%.1f MB", rss), rss <= 60)
	return sec
}

// A one-step run of the no-delay agent emits about this many events.
const (
	eventsPerRun = 12
	storeReplays = 500
)

// storeCostPerRun times, in this process, the store calls a one-step run
// makes, on a store of its own.
func storeCostPerRun(dir string) time.Duration {
	s, err := store.Open(filepath.Join(dir, "replay.db"))
	check(err)
	defer s.Close()
	ctx := context.Background()
	var costs []sample
	for i := 0; i < storeReplays; i++ {
		id := fmt.Sprintf("run-%d", i)
		begin := time.Now()
		check(s.CreateRun(ctx, store.Run{ID: id, Workflow: "batch", WorkflowFile: "/x.yaml", WorkflowHash: "h", Inputs: map[string]any{}}))
		check(s.SaveStep(ctx, store.Step{RunID: id, StepID: "one", Status: engine.StatusRunning, Attempts: 1, StartedAt: begin}))
		check(s.ChildStarted(ctx, id, "one", 1000+i, 1000+i, 42))
		for e := 0; e < eventsPerRun; e++ {
			// As the run service's recorder writes an event.
			ev := steps.Event{RunID: id, Step: "one", Time: time.Now(), Data: acpagent.MessageChunk{Text: "Hello, "}}
			fields, err := ev.FieldsJSON()
			check(err)
			s.AppendEvent(store.Event{RunID: id, StepID: "one", Type: ev.Type(), Time: ev.Time, FieldsJSON: fields})
		}
		check(s.ChildEnded(ctx, id, "one", 1000+i))
		check(s.SaveStep(ctx, store.Step{RunID: id, StepID: "one", Status: engine.StatusSucceeded, StopReason: "completed",
			Output: "Hello, world", Attempts: 1, SessionID: "s", StartedAt: begin, EndedAt: time.Now(), DurationMS: 1}))
		check(s.Flush(ctx))
		check(s.FinishRun(ctx, id, engine.StatusSucceeded, "", map[string]any{}, time.Now()))
		costs = append(costs, sample{wall: time.Since(begin)})
	}
	return time.Duration(median(costs, wallOf)).Round(time.Microsecond)
}
