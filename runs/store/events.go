package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Event is one event of a run's stream (docs/results.md `--json`): run_start,
// step_update (a chunk of agent text; consecutive chunks are joined as
// they are written, see coalesce), permission, and so on.
type Event struct {
	Seq    int64 // assigned by the store, increasing in the order written; 0 in AppendEvent
	RunID  string
	StepID string
	Type   string
	Time   time.Time
	Fields map[string]any
	// FieldsJSON, when set, is Fields already encoded (a JSON object), and
	// AppendEvent writes it as it is; Events never sets it.
	FieldsJSON []byte
}

// How events are batched. A run streams hundreds of events a second (each
// chunk of agent text is one); a transaction per event would cost a commit
// each, and make the engine's event path wait for the disk.
const (
	eventFlushEvery = 50 * time.Millisecond
	eventBatchSize  = 512
	// eventQueueMax bounds the memory queued events take when the writer
	// cannot keep up (a stalled disk); beyond it events are dropped and
	// counted, because AppendEvent must never block the agent's protocol path.
	eventQueueMax = 1 << 16
)

// queuedEvent is an event encoded for its row.
type queuedEvent struct {
	runID, stepID, typ, time, fields string
	chunk                            *textChunk // set when it is a chunk of output (chunkOf)
}

// eventQueue is the events' writer: AppendEvent adds to pending under mu,
// and one goroutine (run) writes them in transactions of up to
// eventBatchSize, every eventFlushEvery or as soon as a batch is full.
type eventQueue struct {
	writer *writer     // writes each batch, grouped with the other writes
	stmts  *writeStmts // prepared on the writer's connection

	mu      sync.Mutex
	pending []queuedEvent
	spare   []queuedEvent // the last written slice, reused
	dropped int           // since last reported by Flush
	err     error         // first write error since last reported by Flush
	closed  bool

	wake  chan struct{}   // a batch is full
	flush chan chan error // Flush's request; answered once pending is written
	stop  chan struct{}
	done  chan struct{}
}

func startEventQueue(w *writer, stmts *writeStmts) *eventQueue {
	q := &eventQueue{
		writer: w,
		stmts:  stmts,
		wake:   make(chan struct{}, 1),
		flush:  make(chan chan error),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	go q.run()
	return q
}

// AppendEvent queues an event to be written. It does not wait for the disk:
// it encodes the event (so the caller may reuse Fields) and returns. Events
// are written within about 50 ms; Flush waits for them.
//
// # Notes
//
// Events are best effort: the ones still queued when acpflow is killed are
// lost, and so are events appended after Close or while the queue is full
// (Flush reports how many). Runs, steps and children are not written this
// way and are never lost once their call returns.
func (s *Store) AppendEvent(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	fields := "{}"
	if len(e.FieldsJSON) > 0 {
		fields = string(e.FieldsJSON)
	} else if len(e.Fields) > 0 {
		b, err := json.Marshal(e.Fields)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"store_error": "fields not encodable: " + err.Error()})
		}
		fields = string(b)
	}
	s.events.add(queuedEvent{runID: e.RunID, stepID: e.StepID, typ: e.Type, time: e.Time.UTC().Format(timeLayout), fields: fields,
		chunk: chunkOf(e.RunID, e.StepID, e.Type, fields)})
}

func (q *eventQueue) add(e queuedEvent) {
	q.mu.Lock()
	if q.closed || len(q.pending) >= eventQueueMax {
		q.dropped++
		q.mu.Unlock()
		return
	}
	q.pending = append(q.pending, e)
	full := len(q.pending) == eventBatchSize
	q.mu.Unlock()
	if full {
		select {
		case q.wake <- struct{}{}:
		default: // already woken
		}
	}
}

// Flush writes the events appended before it and reports what went wrong
// with events since the last Flush: a failed write, or events dropped.
func (s *Store) Flush(ctx context.Context) error {
	q := s.events
	reply := make(chan error, 1)
	select {
	case q.flush <- reply:
	case <-q.done:
		return q.report()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the writer goroutine.
func (q *eventQueue) run() {
	defer close(q.done)
	tick := time.NewTicker(eventFlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			q.writePending()
		case <-q.wake:
			q.writePending()
		case reply := <-q.flush:
			q.writePending()
			reply <- q.report()
		case <-q.stop:
			q.writePending()
			return
		}
	}
}

// writePending writes everything queued, in transactions of at most
// eventBatchSize so that a backlog does not hold the write lock (and the
// engine's SaveStep) for long.
func (q *eventQueue) writePending() {
	q.mu.Lock()
	all := q.pending
	q.pending = q.spare[:0]
	q.mu.Unlock()

	for batch := coalesce(all); len(batch) > 0; {
		n := min(len(batch), eventBatchSize)
		if err := q.write(batch[:n]); err != nil {
			q.mu.Lock()
			if q.err == nil {
				q.err = err
			}
			q.dropped += n
			q.mu.Unlock()
		}
		batch = batch[n:]
	}

	clear(all) // let the strings go
	q.mu.Lock()
	if q.spare = all[:0]; cap(q.spare) > 4*eventBatchSize {
		q.spare = nil // do not keep a backlog's memory forever
	}
	q.mu.Unlock()
}

func (q *eventQueue) write(batch []queuedEvent) error {
	err := q.writer.do(func(tx *sql.Tx) error {
		ctx := context.Background()
		// Rows go in eventsPerInsert at a time: each statement execution
		// has a fixed cost (database/sql, binding, VDBE setup) larger than
		// a row's.
		many, one := tx.StmtContext(ctx, q.stmts.insertEvents), tx.StmtContext(ctx, q.stmts.insertEvent)
		args := make([]any, 0, 5*eventsPerInsert)
		for rest := batch; len(rest) > 0; {
			n, stmt := eventsPerInsert, many
			if len(rest) < eventsPerInsert {
				n, stmt = 1, one
			}
			args = args[:0]
			for _, e := range rest[:n] {
				args = append(args, e.runID, e.stepID, e.typ, e.time, e.fields)
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: write events: %w", err)
	}
	return nil
}

// report returns, and forgets, what went wrong since the last report.
func (q *eventQueue) report() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	err, dropped := q.err, q.dropped
	q.err, q.dropped = nil, 0
	if dropped > 0 {
		err = errors.Join(fmt.Errorf("store: %d events not recorded", dropped), err)
	}
	return err
}

// close writes what is queued, stops the writer and reports.
func (q *eventQueue) close() error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	close(q.stop)
	<-q.done
	return q.report()
}

// ElementEnds reads a run's element_end events (steps.ElementEnd: one per
// for-each element done, with its index), in order: what `show` lists per
// element, without reading every chunk of the run's text.
func (s *Store) ElementEnds(ctx context.Context, runID string) ([]Event, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT seq, step_id, type, time, fields_json FROM events
		WHERE run_id = ? AND type = 'step_update' AND json_extract(fields_json, '$.kind') = 'element_end' ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: read events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		e := Event{RunID: runID}
		var t sql.NullString
		var fields string
		if err := rows.Scan(&e.Seq, &e.StepID, &e.Type, &t, &fields); err != nil {
			return nil, fmt.Errorf("store: read events of run %s: %w", runID, err)
		}
		if e.Time, err = parseTime(t); err != nil {
			return nil, err
		}
		if e.Fields, err = parseMap("event fields", fields); err != nil {
			return nil, fmt.Errorf("store: event %d of run %s: %w", e.Seq, runID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read events of run %s: %w", runID, err)
	}
	return out, nil
}
