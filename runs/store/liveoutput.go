package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// LiveOutput is what one attempt of a step (of a for-each element, when
// Index is set) has written so far: its agent's message chunks or its
// shell's stdout, joined, read from the event log while the attempt runs.
type LiveOutput struct {
	Index *int // the for-each element's index; nil for a step without for-each
	// Started is when the attempt began (its step_start); zero when the
	// text was cut before it.
	Started time.Time
	Attempt int
	Text    string
	// Cut says earlier text of the attempt is not in Text: the whole
	// exceeded what was asked for.
	Cut bool
}

// StepLiveOutput reads the output a step's latest attempts have written so
// far, one LiveOutput per element (one for a step without for-each), in
// index order. It reads the log backwards from the newest event and stops
// at each attempt's step_start, or once maxBytes of text, or liveMaxRows
// rows of it, are read in all, and stops reading once every element's
// (or the step's) step_start is read: what a page shows of a running step
// costs the same after an hour of output, or of the run's other steps, as
// after a second.
func (s *Store) StepLiveOutput(ctx context.Context, runID, stepID string, maxBytes int) ([]LiveOutput, error) {
	if err := s.Ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT type, time, json_extract(fields_json, '$.index'), json_extract(fields_json, '$.attempt'),
			json_extract(fields_json, '$.text'), json_extract(fields_json, '$.elements') FROM events
		WHERE run_id = ? AND step_id = ? AND (type = 'step_start'
			OR (type = 'step_update' AND json_extract(fields_json, '$.kind') IN ('agent_message_chunk', 'stdout')))
		ORDER BY seq DESC`, runID, stepID)
	if err != nil {
		return nil, fmt.Errorf("store: read the output of step %s of run %s: %w", stepID, runID, err)
	}
	defer rows.Close()
	r := liveReader{byKey: map[int64]*liveParts{}}
	for !r.complete() && r.budget(maxBytes) && rows.Next() {
		var typ string
		var at sql.NullString
		var index, attempt, elements sql.NullInt64
		var text sql.NullString
		if err := rows.Scan(&typ, &at, &index, &attempt, &text, &elements); err != nil {
			return nil, fmt.Errorf("store: read the output of step %s of run %s: %w", stepID, runID, err)
		}
		p := r.parts(index)
		switch {
		case p.closed:
		case typ == "step_start":
			p.closed, p.out.Attempt = true, int(attempt.Int64)
			r.closed++
			if r.elements = 1; index.Valid {
				r.elements = elements.Int64 // 0 when unknown: read on
			}
			if p.out.Started, err = parseTime(at); err != nil {
				return nil, err
			}
		default:
			p.pieces = append(p.pieces, lastBytes(text.String, maxBytes-r.read))
			r.read += len(text.String)
			r.rows++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read the output of step %s of run %s: %w", stepID, runID, err)
	}
	return r.outputs(), nil
}

// liveReader gathers StepLiveOutput's text, newest first, by element.
type liveReader struct {
	byKey map[int64]*liveParts // by index; -1 for a step without for-each
	read  int                  // bytes of text
	rows  int                  // rows of text
	// closed counts the parts whose step_start was read, of elements (1
	// for a step without for-each; 0 until a step_start says).
	closed, elements int64
}

// complete says every part's latest attempt began after what is still
// unread: older rows are earlier attempts' only.
func (r *liveReader) complete() bool { return r.elements > 0 && r.closed >= r.elements }

type liveParts struct {
	out    LiveOutput
	pieces []string // newest first
	closed bool     // its attempt's step_start was read: older text is an earlier attempt's
}

// liveMaxRows bounds the rows StepLiveOutput reads: chunks are joined as
// they are written (coalesce), so this is about a minute of a streaming
// step's output, unless other events of the step split it finer.
const liveMaxRows = 1024

func (r *liveReader) budget(max int) bool { return r.read < max && r.rows < liveMaxRows }

func (r *liveReader) parts(index sql.NullInt64) *liveParts {
	key := int64(-1)
	if index.Valid {
		key = index.Int64
	}
	p := r.byKey[key]
	if p == nil {
		p = &liveParts{}
		if index.Valid {
			i := int(index.Int64)
			p.out.Index = &i
		}
		r.byKey[key] = p
	}
	return p
}

// outputs are the attempts' texts in index order; one whose step_start
// was not reached lost its beginning to the budget.
func (r *liveReader) outputs() []LiveOutput {
	out := make([]LiveOutput, 0, len(r.byKey))
	for _, p := range r.byKey {
		slices.Reverse(p.pieces)
		p.out.Text = strings.Join(p.pieces, "")
		p.out.Cut = !p.closed
		out = append(out, p.out)
	}
	slices.SortFunc(out, func(a, b LiveOutput) int {
		if a.Index == nil || b.Index == nil {
			return 0
		}
		return *a.Index - *b.Index
	})
	return out
}

// lastBytes is the end of s, at most n bytes of it, from a character's
// start: a joined row may hold more than the bytes still wanted.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - max(n, 0)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
