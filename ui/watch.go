package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
)

// What watching a run needs beyond the records of what ended: the output
// a running step has written so far, its elapsed time, a for-each step's
// elements with their items, and the decisions a step's node is marked
// with.

// liveOutputMax bounds the text of a running step its page shows: the
// newest 64 KiB, read from the end of the event log (runs.Service.StepLiveOutput).
const liveOutputMax = 64 << 10

// liveView is one running attempt's output on the step page.
type liveView struct {
	Label   string // "attempt 2", "[3] attempt 1"
	Text    string
	Cut     bool
	Since   string // RFC 3339 with milliseconds, for the page's ticking clock; "" when unknown
	Elapsed string
}

// since is t as the page's script reads it (data-since), "" for zero.
func since(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// elapsed words the time from t to now as a duration, to the second.
func elapsed(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return words.Duration(now.Sub(t).Truncate(time.Second).Milliseconds())
}

// liveViews reads what a running step's attempts have written so far.
func (s *Server) liveViews(ctx context.Context, runID, stepID string, now time.Time) ([]liveView, error) {
	outs, err := s.cfg.Store.StepLiveOutput(ctx, runID, stepID, liveOutputMax)
	if err != nil {
		return nil, err
	}
	views := make([]liveView, 0, len(outs))
	for _, o := range outs {
		label := fmt.Sprintf("attempt %d", max(o.Attempt, 1))
		if o.Index != nil {
			label = fmt.Sprintf("element %d, %s", *o.Index, label)
		}
		views = append(views, liveView{Label: label, Text: o.Text, Cut: o.Cut, Since: since(o.Started), Elapsed: elapsed(o.Started, now)})
	}
	return views, nil
}

// elementRow is one for-each element as the step page lists it.
type elementRow struct {
	Index    int
	Item     string // its item as JSON, shortened for the table
	Status   string
	Attempts int
	Duration string
	Since    string // while it runs: its start, for the ticking clock
	Error    string
}

// maxItemText is how much of an item's JSON the elements table shows.
const maxItemText = 200

// elementRows are a for-each step's elements in index order with their
// items: those started (from their step_start events) and those done
// (their element_end); one still running in a run that ended is cancelled.
// waiting is how many have not started yet.
func elementRows(evs []runs.Event, stepID string, done []runs.Element, runEnded bool, now time.Time) (rows []elementRow, waiting int) {
	byIndex := map[int]*elementRow{}
	row := func(i int) *elementRow {
		if byIndex[i] == nil {
			byIndex[i] = &elementRow{Index: i, Status: string(engine.StatusRunning), Duration: "-"}
		}
		return byIndex[i]
	}
	total := 0
	for _, e := range evs {
		idx, ok := e.Fields["index"].(float64)
		if e.StepID != stepID || e.Type != "step_start" || !ok {
			continue
		}
		r := row(int(idx))
		total = max(total, num(e.Fields["elements"]))
		r.Attempts = max(r.Attempts, num(e.Fields["attempt"]))
		if item, ok := e.Fields["item"]; ok && r.Item == "" {
			r.Item = itemText(item)
		}
		if r.Since == "" { // the first attempt's: an element's time counts from it
			r.Since = since(e.Time)
			r.Duration = elapsed(e.Time, now)
		}
	}
	for _, d := range done {
		r := row(d.Index)
		r.Status, r.Attempts, r.Error, r.Since = d.Status, max(r.Attempts, d.Attempts), d.Error, ""
		r.Duration = words.Duration(d.DurationMS)
	}
	for _, r := range byIndex {
		if r.Status == string(engine.StatusRunning) && runEnded {
			r.Status, r.Since = string(engine.StatusCancelled), ""
		}
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(a, b elementRow) int { return a.Index - b.Index })
	return rows, max(0, total-len(rows))
}

// itemText is an item as the elements table shows it: a string as it is,
// anything else as JSON, at most maxItemText bytes of it.
func itemText(v any) string {
	s, ok := v.(string)
	if !ok {
		b, _ := json.Marshal(v)
		s = string(b)
	}
	if len(s) > maxItemText {
		cut := maxItemText
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// The marks a step's node carries for the decisions on it.
const (
	markRejected = "rejected" // a permission request rejected or cancelled
	markUnasked  = "unasked"  // a tool call that ran without asking
	markPending  = "pending"  // a request waiting on a person (approvals)
)

// decisionMarks are the marks of a step's recorded decisions, and of its
// requests pending, in the order the graph draws them.
func decisionMarks(perms []runs.Permission, pending int) []string {
	var rejected, unasked bool
	for _, p := range perms {
		switch policies.Decision(p.Decision) {
		case policies.Reject, policies.RejectAlways, policies.Cancel:
			rejected = true
		case policies.DecisionUnasked:
			unasked = true
		}
	}
	var marks []string
	if pending > 0 {
		marks = append(marks, markPending)
	}
	if rejected {
		marks = append(marks, markRejected)
	}
	if unasked {
		marks = append(marks, markUnasked)
	}
	return marks
}

// pendingByStep counts a run's requests waiting on a person (approvals
// still pending before their deadline), by step.
func pendingByStep(list []runs.Approval) map[string]int {
	var m map[string]int
	now := time.Now()
	for _, a := range list {
		if a.Status == runs.ApprovalPending && a.Deadline.After(now) {
			if m == nil {
				m = map[string]int{}
			}
			m[a.StepID]++
		}
	}
	return m
}

// notFound is the UI's own 404 for a path it has no page at: a page that
// says so and links back (the token stays in the cookie), JSON under /api/.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("acpflow ui: no API at %s (see docs/ui.md#json-api)", r.URL.Path)})
		return
	}
	s.fail(w, http.StatusNotFound, fmt.Errorf("there is no page at %s", r.URL.Path))
}
