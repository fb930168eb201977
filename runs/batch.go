package runs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
)

// batchLine is one line of a batch's inputs: its inputs, resolved, or why
// they are not valid.
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
	prepare func(context.Context) (Spec, error)
}

// jobSource yields a batch's jobs in line order, one at a time, so that a
// batch holds no more of its input than the lines in flight; ok is false
// after the last.
type jobSource func(ctx context.Context) (j batchJob, ok bool, err error)

// linesPerWrite bounds how many input lines one transaction stores, and
// how many a page of stored lines holds when they are read back.
const linesPerWrite = 256

// NewBatch is the record of a new batch of wf in workspace, owned by this
// process, with its first input line. inputsFile is the inputs as the user
// named them ("-" for stdin).
func NewBatch(wf *engine.Workflow, workspace, inputsFile string, concurrency int, first store.BatchLine) store.Batch {
	me := CurrentOwner()
	return store.Batch{
		ID: "b" + engine.NewRunID(), Workflow: wf.Name, WorkflowFile: wf.File, WorkflowHash: wf.Hash,
		Workspace: workspace, InputsFile: inputsFile, Concurrency: concurrency,
		OwnerPID: me.PID, OwnerStartTicks: me.StartTicks, Lines: []store.BatchLine{first},
	}
}

// Batch records a new batch (see NewBatch) and runs its lines, concurrency
// at a time; lines yields the lines after the first. When all is true
// (lines is a regular file), every line is stored before the first run, so
// that resume can run those a crash kept from starting; otherwise (a
// stream) each line is stored and run as it comes. A line that cannot be
// read is an *InvalidError, and nothing ran. Without a Store nothing is
// recorded and every batch runs as a stream.
func (r *Runner) Batch(ctx context.Context, wf *engine.Workflow, b store.Batch, lines *LineReader, all bool, concurrency int) error {
	if r.Store != nil {
		if err := r.Store.CreateBatch(ctx, b); err != nil {
			return err
		}
	}
	var next jobSource
	if all && r.Store != nil {
		total, err := r.storeLines(ctx, b.ID, lines)
		if err != nil {
			r.record(func(s *store.Store) error { return s.FinishBatch(ctx, b.ID, engine.StatusFailed) })
			return invalid(err)
		}
		if r.BatchStarted != nil {
			r.BatchStarted(b, total)
		}
		next = r.storedJobs(wf, b, nil)
	} else {
		if r.BatchStarted != nil {
			r.BatchStarted(b, -1)
		}
		next = r.streamJobs(ctx, wf, b, lines)
	}
	r.runJobs(ctx, wf, b, next, concurrency, nil)
	return nil
}

// storeLines reads the rest of a batch's lines into the store, a
// transaction per linesPerWrite lines, and returns how many lines the batch
// has (with the first, which CreateBatch stored).
func (r *Runner) storeLines(ctx context.Context, batchID string, lines *LineReader) (int, error) {
	total := 1
	var page []store.BatchLine
	var size int64
	flush := func() error {
		err := r.Store.AddBatchLines(ctx, batchID, page)
		page, size = page[:0], 0
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("--inputs %s: interrupted while reading", lines.path)
		}
		l, err := lines.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return total, err
		}
		page = append(page, l)
		total++
		// A page's inputs are held until written: bound them by size too.
		if size += lines.size; len(page) == linesPerWrite || size > MaxLine {
			if err := flush(); err != nil {
				return total, err
			}
		}
	}
	if err := flush(); err != nil {
		return total, err
	}
	return total, r.Store.BatchInputsComplete(ctx, batchID)
}

// streamJobs runs a stream's lines as they come: each is stored, then run.
// The reading happens on a goroutine of its own, so that an interrupt is
// not kept waiting for a line that may never come.
func (r *Runner) streamJobs(ctx context.Context, wf *engine.Workflow, b store.Batch, lines *LineReader) jobSource {
	type read struct {
		l   store.BatchLine
		err error
	}
	ch := make(chan read)
	go func() {
		for {
			l, err := lines.Next()
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
		var rd read
		select {
		case rd = <-ch:
		case <-ctx.Done():
			return batchJob{}, false, ctx.Err()
		}
		if errors.Is(rd.err, io.EOF) {
			r.record(func(s *store.Store) error { return s.BatchInputsComplete(ctx, b.ID) })
			return batchJob{}, false, nil
		}
		if rd.err != nil {
			return batchJob{}, false, rd.err
		}
		r.record(func(s *store.Store) error { return s.AddBatchLines(ctx, b.ID, []store.BatchLine{rd.l}) })
		return batchJob{line: resolveLine(wf, b.InputsFile, rd.l)}, true, nil
	}
}

// storedJobs yields a batch's stored lines, a page at a time. With
// prepare (resume), a line whose last run succeeded is passed over and a
// line that has a run resumes it.
func (r *Runner) storedJobs(wf *engine.Workflow, b store.Batch, prepare func(context.Context, store.Run) (Spec, error)) jobSource {
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
				if page, err = r.Store.BatchLines(ctx, b.ID, after, linesPerWrite); err != nil {
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
					if latest, err = r.Store.LatestRuns(ctx, b.ID, page[0].Line, after); err != nil {
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
			if ran && run.Status == engine.StatusSucceeded {
				continue
			}
			if ran && j.line.err == nil {
				j.prepare = func(ctx context.Context) (Spec, error) { return prepare(ctx, run) }
			}
			return j, true, nil
		}
	}
}

// runJobs runs a batch's jobs, concurrency at a time, and ends the batch's
// record. It keeps no run's result: each goes to Result and the store as
// the run ends; only counts are kept.
func (r *Runner) runJobs(ctx context.Context, wf *engine.Workflow, b store.Batch, next jobSource, concurrency int, spent map[string]*steps.Usage) {
	var wg sync.WaitGroup
	shared := steps.NewScope(concurrency)
	// A budget exceeded cancels the runs in flight and starts no more
	// lines, as an interrupt does, and the batch fails saying why.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var meter *engine.BatchMeter
	var over error
	if !r.Budget.IsZero() {
		meter = engine.NewBatchMeter(r.Budget, spent, func(err error) {
			over = err
			cancel(err)
		})
		meter.Check()
	}
	var readErr error
	slots := make(chan struct{}, max(concurrency, 1))
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
			r.runJob(ctx, wf, b, j, shared, meter)
		}()
	}
	wg.Wait()
	// The agents the runs shared (reuse: true) are torn down before the
	// batch is done.
	shared.End()
	status := engine.StatusSucceeded
	switch {
	case over != nil:
		status = engine.StatusFailed
		r.record(func(s *store.Store) error {
			return s.SetBatchError(context.WithoutCancel(ctx), b.ID, r.Budget.String(), over.Error())
		})
		r.notice("batch %s stopped: %s (acpflow resume %s --budget … runs what is left)", b.ID, over, b.ID)
		r.mu.Lock()
		r.failed++
		r.mu.Unlock()
	case ctx.Err() != nil:
		status = engine.StatusCancelled
	case readErr != nil || r.Failures() > 0:
		status = engine.StatusFailed
	}
	r.record(func(s *store.Store) error { return s.FinishBatch(context.WithoutCancel(ctx), b.ID, status) })
	if readErr != nil {
		if r.Store == nil { // no record: its id names nothing
			r.notice("the batch stopped reading its inputs: %s", readErr)
		} else {
			r.notice("batch %s stopped reading its inputs: %s", b.ID, readErr)
		}
		r.mu.Lock()
		r.failed++
		r.mu.Unlock()
	}
}

// runJob runs one line: a bad line is recorded as a failed run, a line
// with a recorded run resumes it, any other starts a new run.
func (r *Runner) runJob(ctx context.Context, wf *engine.Workflow, b store.Batch, j batchJob, shared *steps.Scope, meter *engine.BatchMeter) {
	if j.line.err != nil {
		r.invalidLine(ctx, wf, b, j.line)
		return
	}
	spec := Spec{Inputs: j.line.inputs, Workspace: b.Workspace, BatchID: b.ID, BatchLine: j.line.line}
	if j.prepare != nil {
		var err error
		if spec, err = j.prepare(ctx); err != nil {
			var owned *store.OwnedError
			if errors.As(err, &owned) {
				// Another process runs this line's run: nothing of it is ours
				// to record, only to count.
				res := &engine.RunResult{RunID: owned.ID, Status: engine.StatusFailed, Error: err.Error()}
				r.mu.Lock()
				r.runs++
				r.failed++
				r.failedRuns++
				r.mu.Unlock()
				r.emit(lineEvent(res))
				return
			}
			j.line.err = err
			r.invalidLine(ctx, wf, b, j.line)
			return
		}
	}
	spec.Shared, spec.Meter = shared, meter
	r.Run(ctx, wf, spec)
}

// invalidLine records a line whose inputs are not valid as a failed run,
// so that the batch has one result per line and `show` says why.
func (r *Runner) invalidLine(ctx context.Context, wf *engine.Workflow, b store.Batch, l batchLine) {
	now := time.Now().UTC()
	res := &engine.RunResult{
		RunID: engine.NewRunID(), Workflow: wf.Name, Status: engine.StatusFailed, Error: l.err.Error(),
		Workspace: b.Workspace, Inputs: l.raw, Outputs: map[string]any{}, StartedAt: now,
		Steps: map[string]*engine.StepResult{},
	}
	ctx = context.WithoutCancel(ctx)
	r.record(func(s *store.Store) error {
		err := s.CreateRun(ctx, store.Run{
			ID: res.RunID, BatchID: b.ID, BatchLine: l.line, Workflow: wf.Name, WorkflowFile: wf.File,
			WorkflowHash: wf.Hash, Workspace: b.Workspace, Inputs: l.raw, StartedAt: now,
		})
		if err == nil {
			err = s.FinishRun(ctx, res.RunID, res.Status, res.Error, nil, now)
		}
		if err != nil {
			return fmt.Errorf("run %s: %w", res.RunID, err)
		}
		return nil
	})
	r.emit(lineEvent(res))
	r.ended(res)
}

// record does a write of the run store, when the Runner has one, and
// keeps its error for StoreErrors.
func (r *Runner) record(write func(*store.Store) error) {
	if r.Store != nil {
		r.storeErr(write(r.Store))
	}
}
