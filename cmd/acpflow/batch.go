package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/store"
	"github.com/acpflow/acpflow/workflows"
)

// batchLine is one line of a batch's inputs file: its inputs, resolved,
// or why they are not valid.
type batchLine struct {
	line   int
	raw    map[string]any // as written, for the store
	inputs map[string]any // resolved: defaults applied, types checked
	err    error
}

// maxBatchLine bounds one JSONL line (an input object can hold a document).
const maxBatchLine = 16 << 20

// readBatch reads a JSONL file of input objects ("-" is stdin). Blank lines
// are skipped; a line that is not a JSON object or does not fit the
// workflow's inputs is kept with its error: it counts as a failed run, it
// does not stop the batch.
func readBatch(path string, wf *engine.Workflow) ([]batchLine, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--inputs: %w", err)
		}
		defer f.Close()
		r = f
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxBatchLine)
	var lines []batchLine
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		l := batchLine{line: n}
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil || obj == nil {
			l.err = fmt.Errorf("%s:%d: not a JSON object of inputs", path, n)
		} else {
			l.raw = obj
			if l.inputs, err = workflows.ResolveInputs(wf, obj); err != nil {
				l.err = fmt.Errorf("%s:%d: %w", path, n, err)
			}
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--inputs %s: %w", path, err)
	}
	if len(lines) == 0 {
		return nil, errors.New("--inputs " + path + ": no input lines")
	}
	return lines, nil
}

func newBatch(wf *engine.Workflow, workspace string, f *runFlags, lines []batchLine) store.Batch {
	b := store.Batch{
		ID: "b" + engine.NewRunID(), Workflow: wf.Name, WorkflowFile: wf.File, WorkflowHash: wf.Hash,
		Workspace: workspace, InputsFile: f.inputsFile, Concurrency: f.concurrency,
	}
	for _, l := range lines {
		b.Lines = append(b.Lines, store.BatchLine{Line: l.line, Inputs: l.raw})
	}
	return b
}

// batchJob is one line to run: new, or a recorded run to resume.
type batchJob struct {
	line batchLine
	spec runSpec
}

// batch records the batch, then runs its lines, concurrency at a time.
func (x *executor) batch(ctx context.Context, wf *engine.Workflow, b store.Batch, lines []batchLine, concurrency int) error {
	if err := x.store.CreateBatch(ctx, b); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "acpflow: batch %s: %d runs (if it stops half-way: acpflow resume %s)\n", b.ID, len(lines), b.ID)
	jobs := make([]batchJob, len(lines))
	for i, l := range lines {
		jobs[i] = batchJob{line: l, spec: runSpec{inputs: l.inputs, batchID: b.ID, batchLine: l.line}}
	}
	return x.runJobs(ctx, wf, b.ID, jobs, concurrency)
}

// runJobs runs a batch's jobs and ends the batch's record.
func (x *executor) runJobs(ctx context.Context, wf *engine.Workflow, batchID string, jobs []batchJob, concurrency int) error {
	var (
		mu      sync.Mutex
		results []*engine.RunResult
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, concurrency)
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			var res *engine.RunResult
			if j.line.err != nil {
				res = x.invalidLine(ctx, wf, batchID, j.line)
			} else {
				res = x.run(ctx, wf, j.spec)
			}
			mu.Lock()
			results = append(results, res)
			mu.Unlock()
		}()
	}
	wg.Wait()
	status := store.StatusSucceeded
	for _, r := range results {
		if r.Status != engine.StatusSucceeded {
			status = store.StatusFailed
		}
	}
	if len(results) < len(jobs) {
		status = store.StatusCancelled
	}
	x.store.FinishBatch(context.WithoutCancel(ctx), batchID, status)
	return x.exit(ctx, results)
}

// invalidLine records a line whose inputs are not valid as a failed run,
// so that the batch has one result per line and `show` says why.
func (x *executor) invalidLine(ctx context.Context, wf *engine.Workflow, batchID string, l batchLine) *engine.RunResult {
	now := time.Now().UTC()
	res := &engine.RunResult{
		RunID: engine.NewRunID(), Workflow: wf.Name, Status: engine.StatusFailed, Error: l.err.Error(),
		Workspace: x.workspace, Inputs: l.raw, Outputs: map[string]any{}, StartedAt: now,
		Steps: map[string]*engine.StepResult{},
	}
	ctx = context.WithoutCancel(ctx)
	err := x.store.CreateRun(ctx, store.Run{
		ID: res.RunID, BatchID: batchID, BatchLine: l.line, Workflow: wf.Name, WorkflowFile: wf.File,
		WorkflowHash: wf.Hash, Workspace: x.workspace, Inputs: l.raw, StartedAt: now,
	})
	if err == nil {
		err = x.store.FinishRun(ctx, res.RunID, res.Status, res.Error, nil, now)
	}
	if err != nil {
		x.mu.Lock()
		x.storeErrs = append(x.storeErrs, err)
		x.mu.Unlock()
	}
	x.view.Emit(lineEvent(res))
	x.out.write(res)
	return res
}
