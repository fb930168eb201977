package ui

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/store"
)

// fixture is a store the test fills (read-write), and the UI over it
// (read-only).
type fixture struct {
	path string
	w    *store.Store
	ui   *runs.Service
	srv  *Server
}

func newFixture(tb testing.TB, cfg Config) *fixture {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "state.db")
	w, err := store.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { w.Close() })
	return openFixture(tb, path, w, cfg)
}

func openFixture(tb testing.TB, path string, w *store.Store, cfg Config) *fixture {
	tb.Helper()
	r, err := runs.OpenReadOnly(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	cfg.Store = r
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	srv, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &fixture{path: path, w: w, ui: r, srv: srv}
}

// addRun records a finished run with one step.
func (f *fixture) addRun(tb testing.TB, id string, started time.Time, status engine.Status, errText string) {
	tb.Helper()
	ctx := context.Background()
	if err := f.w.CreateRun(ctx, store.Run{ID: id, Workflow: "wf", StartedAt: started}); err != nil {
		tb.Fatal(err)
	}
	if err := f.w.SaveStep(ctx, store.Step{RunID: id, StepID: "s", Status: status, Output: "out of " + id, Attempts: 1, Error: errText,
		StartedAt: started, EndedAt: started.Add(time.Second), DurationMS: 1000}); err != nil {
		tb.Fatal(err)
	}
	if status != engine.StatusRunning {
		if err := f.w.FinishRun(ctx, id, status, errText, nil, started.Add(time.Second)); err != nil {
			tb.Fatal(err)
		}
	}
}

// testToken is the fixtures' token when the test names none.
const testToken = "fixture-token-0123456789"

// get serves one request on the handler, as from the loopback address,
// with the server's token as a Bearer header unless h sets Authorization
// ("" for none) or a Cookie.
func (f *fixture) get(target string, h ...[2]string) *httptest.ResponseRecorder {
	return f.do(http.MethodGet, target, h...)
}

func (f *fixture) do(method, target string, h ...[2]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	req.Host = "127.0.0.1:8080"
	req.Header.Set("Authorization", "Bearer "+f.srv.cfg.Token)
	for _, kv := range h {
		if kv[0] == "Cookie" {
			req.Header.Del("Authorization")
		}
		if kv[0] == "Host" {
			req.Host = kv[1]
			continue
		}
		req.Header.Set(kv[0], kv[1])
	}
	if req.Header.Get("Authorization") == "" {
		req.Header.Del("Authorization")
	}
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	return rec
}
