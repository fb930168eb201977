package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
)

// pageSize is how many runs a page lists unless ?n= says otherwise; maxPage
// bounds ?n=.
const (
	pageSize = 50
	maxPage  = 500
)

var runStatuses = []string{"running", "waiting", "succeeded", "failed", "cancelled"}

var funcs = template.FuncMap{
	// approvalList is what the approval-list template takes: the pending
	// approvals, whether the list is the whole page's (All: it says when
	// there are none), and whether it is an answer link's (Link: its one
	// button is the link's own).
	"approvalList": func(list []approvalView, all, link bool) map[string]any {
		return map[string]any{"Approvals": list, "All": all, "Link": link}
	},
	"pretty": prettyJSON,
	"dur":    words.Duration,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"usage": func(u *engine.RunUsage) string { return words.RunUsage(u) },
	"stepUsage": func(u *steps.Usage) string {
		if u == nil {
			return "-"
		}
		return words.Usage(u)
	},
	"cost": func(amount float64, currency string) string {
		if currency == "" {
			return "-"
		}
		return fmt.Sprintf("%.4f %s", amount, currency)
	},
	"pct": func(a, b int) int {
		if b <= 0 {
			return 0
		}
		return a * 100 / b
	},
}

// prettyJSON is v as indented JSON, for a <pre>; a string as it is.
func prettyJSON(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // html/template escapes it where it is shown
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimRight(b.String(), "\n")
}

// render writes a page; an error rendering it is the server's.
func (s *Server) render(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "acpflow ui: render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

// fail answers a request it cannot serve, with a page that says why.
func (s *Server) fail(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	s.tmpl.ExecuteTemplate(w, "error.html", map[string]any{"Title": http.StatusText(code), "Error": err.Error(), "NotFound": code == http.StatusNotFound})
}

// storeCode is the HTTP status of a store error: not found, or the server's.
func storeCode(err error) int {
	if errors.Is(err, runs.ErrNotFound) || errors.Is(err, runs.ErrAmbiguous) {
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// listQuery is what the runs page and /api/runs take: the filters of
// `acpflow runs` (workflow, status, batch), since, and a page (n, before).
type listQuery struct {
	Workflow, Status, Batch, Since string
	N                              int
	Before                         string
	filter                         runs.Filter
}

func parseListQuery(q url.Values, defaultN int) (listQuery, error) {
	lq := listQuery{Workflow: q.Get("workflow"), Status: q.Get("status"), Batch: q.Get("batch"), Since: q.Get("since"), Before: q.Get("before"), N: defaultN}
	if v := q.Get("n"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			return lq, fmt.Errorf("n=%q: want a number from 1 to %d", v, maxPage)
		}
		lq.N = n
	}
	if lq.Status != "" && !slices.Contains(runStatuses, lq.Status) {
		return lq, fmt.Errorf("status=%q: want one of %s", lq.Status, strings.Join(runStatuses, ", "))
	}
	f := runs.Filter{Status: engine.Status(lq.Status), Workflow: lq.Workflow, Batch: lq.Batch}
	if lq.Since != "" {
		t, err := parseSince(lq.Since, time.Now())
		if err != nil {
			return lq, err
		}
		f.Since = t
	}
	if lq.Before != "" {
		c, err := parseCursor(lq.Before)
		if err != nil {
			return lq, err
		}
		f.Before = c
	}
	lq.filter = f
	return lq, nil
}

// parseSince reads since=: a duration back from now (24h, 90m), a date
// (2026-12-01) or a time (RFC 3339).
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("since=%q: want a duration back from now (24h), a date (2026-12-01) or a time (2026-12-01T09:00:00Z)", s)
}

// A cursor in an address is the last run's start (Unix nanoseconds) and
// id: `1764950400000000000~RUN_ID`.
func cursorOf(r runs.Run) string {
	return strconv.FormatInt(r.StartedAt.UnixNano(), 10) + "~" + r.ID
}

func parseCursor(s string) (*runs.Cursor, error) {
	ns, id, ok := strings.Cut(s, "~")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, fmt.Errorf("before=%q: not a page cursor of this UI (follow the page's Older link)", s)
	}
	return &runs.Cursor{StartedAt: time.Unix(0, n), ID: id}, nil
}

// page lists one page of runs and says where the next begins ("": none).
func (s *Server) page(r *http.Request, lq listQuery) ([]runs.Run, string, error) {
	f := lq.filter
	f.Limit = lq.N + 1
	list, err := s.cfg.Store.ListRuns(r.Context(), f)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(list) > lq.N {
		list = list[:lq.N]
		next = cursorOf(list[len(list)-1])
	}
	return list, next, nil
}

// runRow is a run as the runs table shows it.
type runRow struct {
	runs.Run
	Duration, Usage string
}

func rowsOf(list []runs.Run) []runRow {
	out := make([]runRow, len(list))
	for i, r := range list {
		out[i] = runRow{Run: r, Duration: "-", Usage: "-"}
		if !r.EndedAt.IsZero() {
			out[i].Duration = words.Duration(r.DurationMS)
			out[i].Usage = words.RunUsage(r.Usage)
		}
	}
	return out
}

func (s *Server) runsPage(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query(), pageSize)
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	list, next, err := s.page(r, lq)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	batches, err := s.batches.list(r.Context(), s.cfg.Store, lq.Workflow, lq.Batch)
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	nextURL := ""
	if next != "" {
		q := r.URL.Query()
		q.Set("before", next)
		nextURL = "/?" + q.Encode()
	}
	pending, err := s.cfg.Store.PendingApprovals(r.Context())
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.render(w, "runs.html", map[string]any{
		"Title": "runs", "Q": lq, "Runs": rowsOf(list), "Next": nextURL, "Batches": batches,
		"Statuses": runStatuses, "Store": s.cfg.Store.Path(), "First": lq.Before == "",
		"Approvals": approvalViews(pending),
	})
}

// apiRuns is /api/runs: the runs as `acpflow runs --json` prints them,
// one JSON object a line, newest first, with the same filters as the page
// (n: 50 unless given); a Link header names the next page.
func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query(), pageSize)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	list, next, err := s.page(r, lq)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if next != "" {
		q := r.URL.Query()
		q.Set("before", next)
		w.Header().Set("Link", `</api/runs?`+q.Encode()+`>; rel="next"`)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	writeLines(w, list)
}

func writeLines(w http.ResponseWriter, list []runs.Run) {
	for _, run := range list {
		b, err := json.Marshal(runs.RunJSON(run))
		if err != nil {
			return
		}
		w.Write(append(b, '\n'))
	}
}

// apiRun is /api/runs/RUN_ID: the run as `acpflow show --json` prints it
// (a batch id: its runs, as `show --json` lists them).
func (s *Server) apiRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, kind, err := s.cfg.Store.ResolveID(ctx, r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), storeCode(err))
		return
	}
	if kind == runs.KindBatch {
		list, err := s.cfg.Store.RunsOfBatch(ctx, id)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		writeLines(w, list)
		return
	}
	d, err := s.cfg.Store.GetRun(ctx, id)
	if err != nil {
		http.Error(w, err.Error(), storeCode(err))
		return
	}
	els, err := s.cfg.Store.Elements(ctx, d.Run.ID)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b, err := json.MarshalIndent(runs.DetailJSON(d, els), "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// apiCancel interrupts a running run as Ctrl-C would (runs.Service.Interrupt):
// 202 when its acpflow process was signalled, 409 when it is not running.
func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, kind, err := s.cfg.Store.ResolveID(ctx, r.PathValue("id"))
	if err == nil && kind == runs.KindBatch {
		err = fmt.Errorf("%s is a batch: cancel one of its runs (that stops the batch's acpflow process, and so every run of it)", id)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, storeCode(err), map[string]any{"error": err.Error()})
		return
	}
	owner, err := s.cfg.Store.Interrupt(ctx, id)
	var nr *runs.NotRunningError
	switch {
	case errors.As(err, &nr):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "run_id": id, "status": nr.Status})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error(), "run_id": id})
	default:
		writeJSON(w, http.StatusAccepted, map[string]any{"run_id": id, "signalled_pid": owner.PID,
			"message": fmt.Sprintf("interrupted acpflow process %d: run %s is being cancelled (its steps tear down)", owner.PID, id)})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// batchCache keeps the summaries of batches that ended: counting a batch's
// runs reads each of them, and an ended batch's do not change until it is
// resumed (which clears its end, and so its key).
type batchCache struct {
	mu sync.Mutex
	m  map[string]runs.BatchSummary
}

func batchKey(b runs.Batch) string {
	return b.ID + "|" + string(b.Status) + "|" + b.EndedAt.String()
}

// list is the newest batches (10) with their runs counted.
func (c *batchCache) list(ctx context.Context, st *runs.Service, workflow, id string) ([]runs.BatchSummary, error) {
	list, err := st.ListBatches(ctx, workflow, id, 10, func(b runs.Batch) (runs.BatchSummary, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		sum, ok := c.m[batchKey(b)]
		return sum, ok
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]runs.BatchSummary{}
	}
	for _, b := range list {
		if !b.EndedAt.IsZero() && b.Status != engine.StatusRunning && b.Running == 0 {
			c.m[batchKey(b.Batch)] = b
		}
	}
	return list, nil
}
