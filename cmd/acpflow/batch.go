package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/engine/store"
)

// batchLine is one line of a batch's inputs file: its inputs, resolved,
// or why they are not valid.
type batchLine struct {
	line   int
	raw    map[string]any // as written, for the store
	inputs map[string]any // resolved: defaults applied, types checked
	err    error
}

// batchJob is one line to run: new, or one whose recorded run is resumed
// (prepare claims that run and says how to resume it).
type batchJob struct {
	line    batchLine
	prepare func(context.Context) (runSpec, error)
}

// jobSource yields a batch's jobs in line order, one at a time, so that a
// batch holds no more of its input than the lines in flight; ok is false
// after the last.
type jobSource func(ctx context.Context) (j batchJob, ok bool, err error)

// linesPerWrite bounds how many input lines one transaction stores, and
// how many a page of stored lines holds when they are read back.
const linesPerWrite = 256

func newBatch(wf *engine.Workflow, workspace string, f *runFlags, first store.BatchLine) store.Batch {
	me := currentOwner()
	return store.Batch{
		ID: "b" + engine.NewRunID(), Workflow: wf.Name, WorkflowFile: wf.File, WorkflowHash: wf.Hash,
		Workspace: workspace, InputsFile: f.inputsFile, Concurrency: f.concurrency,
		OwnerPID: me.PID, OwnerStartTicks: me.StartTicks, Lines: []store.BatchLine{first},
	}
}

// batch records a new batch and runs its lines, concurrency at a time. The
// lines of a regular file are all stored before the first run (so that
// resume can run those a crash kept from starting); a stream's lines are
// stored and run as they come.
func (x *executor) batch(ctx context.Context, wf *engine.Workflow, b store.Batch, in *batchInput, lines *lineReader, concurrency int) error {
	if err := x.store.CreateBatch(ctx, b); err != nil {
		return err
	}
	var next jobSource
	if in.regular {
		total, err := x.storeLines(ctx, b.ID, lines)
		if err != nil {
			x.storeErr(x.store.FinishBatch(ctx, b.ID, store.StatusFailed))
			x.reportStoreErrs()
			return usageError(err)
		}
		fmt.Fprintf(os.Stderr, "acpflow: batch %s: %d runs (if it stops half-way: acpflow resume %s)\n", b.ID, total, b.ID)
		setTotal(x.view, total)
		next = x.storedJobs(wf, b, nil)
	} else {
		fmt.Fprintf(os.Stderr, "acpflow: batch %s: a run per line as they come (if it stops half-way: acpflow resume %s)\n", b.ID, b.ID)
		next = x.streamJobs(ctx, wf, b, lines)
	}
	return x.runJobs(ctx, wf, b.ID, next, concurrency)
}

// storeLines reads the rest of a batch's lines into the store, a
// transaction per linesPerWrite lines, and returns how many lines the batch
// has (with the first, which CreateBatch stored).
func (x *executor) storeLines(ctx context.Context, batchID string, lines *lineReader) (int, error) {
	total := 1
	var page []store.BatchLine
	var size int64
	flush := func() error {
		err := x.store.AddBatchLines(ctx, batchID, page)
		page, size = page[:0], 0
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("--inputs %s: interrupted while reading", lines.path)
		}
		l, err := lines.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return total, err
		}
		page = append(page, l)
		total++
		// A page's inputs are held until written: bound them by size too.
		if size += lines.size; len(page) == linesPerWrite || size > maxBatchLine {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if err := flush(); err != nil {
		return total, err
	}
	return total, x.store.BatchInputsComplete(ctx, batchID)
}

// streamJobs runs a stream's lines as they come: each is stored, then run.
// The reading happens on a goroutine of its own, so that an interrupt is
// not kept waiting for a line that may never come.
func (x *executor) streamJobs(ctx context.Context, wf *engine.Workflow, b store.Batch, lines *lineReader) jobSource {
	type read struct {
		l   store.BatchLine
		err error
	}
	ch := make(chan read)
	go func() {
		for {
			l, err := lines.next()
			select {
			case ch <- read{l, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	first, pending := b.Lines[0], true
	return func(ctx context.Context) (batchJob, bool, error) {
		if pending {
			pending = false
			return batchJob{line: resolveLine(wf, b.InputsFile, first)}, true, nil
		}
		var r read
		select {
		case r = <-ch:
		case <-ctx.Done():
			return batchJob{}, false, ctx.Err()
		}
		if errors.Is(r.err, io.EOF) {
			x.storeErr(x.store.BatchInputsComplete(ctx, b.ID))
			return batchJob{}, false, nil
		}
		if r.err != nil {
			return batchJob{}, false, r.err
		}
		x.storeErr(x.store.AddBatchLines(ctx, b.ID, []store.BatchLine{r.l}))
		return batchJob{line: resolveLine(wf, b.InputsFile, r.l)}, true, nil
	}
}

// storedJobs yields a batch's stored lines, a page at a time. With
// prepare (resume), a line whose last run succeeded is passed over and a
// line that has a run resumes it.
func (x *executor) storedJobs(wf *engine.Workflow, b store.Batch, prepare func(context.Context, store.Run) (runSpec, error)) jobSource {
	var (
		page   []store.BatchLine
		latest map[int]store.Run
		after  int
		done   bool
	)
	return func(ctx context.Context) (batchJob, bool, error) {
		for {
			if len(page) == 0 {
				if done {
					return batchJob{}, false, nil
				}
				var err error
				if page, err = x.store.BatchLines(ctx, b.ID, after, linesPerWrite); err != nil {
					return batchJob{}, false, err
				}
				if len(page) < linesPerWrite {
					done = true
				}
				if len(page) == 0 {
					return batchJob{}, false, nil
				}
				after = page[len(page)-1].Line
				if prepare != nil {
					if latest, err = x.store.LatestRuns(ctx, b.ID, page[0].Line, after); err != nil {
						return batchJob{}, false, err
					}
				}
			}
			l := page[0]
			page = page[1:]
			j := batchJob{line: resolveLine(wf, b.InputsFile, l)}
			if prepare == nil {
				return j, true, nil
			}
			run, ran := latest[l.Line]
			if ran && run.Status == store.StatusSucceeded {
				continue
			}
			if ran && j.line.err == nil {
				j.prepare = func(ctx context.Context) (runSpec, error) { return prepare(ctx, run) }
			}
			return j, true, nil
		}
	}
}

// runJobs runs a batch's jobs, concurrency at a time, and ends the batch's
// record. It keeps no run's result: each goes to --output and the store as
// the run ends, and the view and the exit code need only counts.
func (x *executor) runJobs(ctx context.Context, wf *engine.Workflow, batchID string, next jobSource, concurrency int) error {
	var wg sync.WaitGroup
	var readErr error
	slots := make(chan struct{}, concurrency)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		j, ok, err := next(ctx)
		if err != nil || !ok {
			if ctx.Err() == nil {
				readErr = err
			}
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			x.runJob(ctx, wf, batchID, j)
		}()
	}
	wg.Wait()
	status := store.StatusSucceeded
	switch {
	case ctx.Err() != nil:
		status = store.StatusCancelled
	case readErr != nil || x.failures() > 0:
		status = store.StatusFailed
	}
	x.storeErr(x.store.FinishBatch(ctx, batchID, status))
	if readErr != nil {
		fmt.Fprintf(os.Stderr, "acpflow: batch %s stopped reading its inputs: %s\n", batchID, readErr)
		x.mu.Lock()
		x.failed++
		x.mu.Unlock()
	}
	return x.exit(ctx, nil)
}

// runJob runs one line: a bad line is recorded as a failed run, a line
// with a recorded run resumes it, any other starts a new run.
func (x *executor) runJob(ctx context.Context, wf *engine.Workflow, batchID string, j batchJob) {
	if j.line.err != nil {
		x.invalidLine(ctx, wf, batchID, j.line)
		return
	}
	spec := runSpec{inputs: j.line.inputs, batchID: batchID, batchLine: j.line.line}
	if j.prepare != nil {
		var err error
		if spec, err = j.prepare(ctx); err != nil {
			var owned *store.OwnedError
			if errors.As(err, &owned) {
				// Another process runs this line's run: nothing of it is ours
				// to record, only to count.
				x.count(&engine.RunResult{RunID: owned.ID, Status: engine.StatusFailed})
				x.view.Emit(lineEvent(&engine.RunResult{RunID: owned.ID, Status: engine.StatusFailed, Error: err.Error()}))
				return
			}
			j.line.err = err
			x.invalidLine(ctx, wf, batchID, j.line)
			return
		}
	}
	x.run(ctx, wf, spec)
}

// invalidLine records a line whose inputs are not valid as a failed run,
// so that the batch has one result per line and `show` says why.
func (x *executor) invalidLine(ctx context.Context, wf *engine.Workflow, batchID string, l batchLine) {
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
		x.storeErr(fmt.Errorf("run %s: %w", res.RunID, err))
	}
	x.count(res)
	x.view.Emit(lineEvent(res))
	x.out.write(res)
}
