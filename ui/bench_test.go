package ui

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs/store"
	_ "github.com/acpflow/acpflow/steps/shell" // the big workflow's `run:` steps, as the binary registers them
	"github.com/acpflow/acpflow/workflows"
)

// The UI's speed over big stores (issue 25):
//
//	go test ./ui -run '^$' -bench . -benchtime 20x
//
// BenchmarkRunsPage: the runs page over 100,000 runs (target < 100 ms of
// server time); BenchmarkRunPage500Steps: a run of 500 steps with its
// graph (< 1 s); BenchmarkLiveUpdate: an event committed to the store
// until the SSE stream tells a page (< 200 ms).

const timeLayout = "2006-01-02T15:04:05.000000000Z"

var (
	bigOnce  sync.Once
	bigPath  string
	bigFirst time.Time
	bigErr   error
)

// bigStore is a store of 100,000 runs (a fifth of them in 4 batches, one
// in ten failed), written once per process in one transaction.
func bigStore(b *testing.B) string {
	bigOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acpflow-ui-bench-")
		if err != nil {
			bigErr = err
			return
		}
		bigPath = filepath.Join(dir, "state.db")
		w, err := store.Open(bigPath)
		if err != nil {
			bigErr = err
			return
		}
		w.Close()
		db, err := sql.Open("sqlite", bigPath)
		if err != nil {
			bigErr = err
			return
		}
		defer db.Close()
		tx, err := db.Begin()
		if err != nil {
			bigErr = err
			return
		}
		bigFirst = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := range 4 {
			tx.Exec(`INSERT INTO batches (id, workflow_name, status, created_at, ended_at) VALUES (?, 'batchwf', 'succeeded', ?, ?)`,
				fmt.Sprintf("b%d", i), bigFirst.Add(time.Duration(i)*time.Hour).Format(timeLayout), bigFirst.Add(40*time.Hour).Format(timeLayout))
		}
		ins, err := tx.Prepare(`INSERT INTO runs (id, batch_id, batch_line, workflow_name, workflow_file, status, started_at, ended_at, duration_ms, usage_json)
			VALUES (?, ?, ?, ?, '/w/wf.yaml', ?, ?, ?, 1200, ?)`)
		if err != nil {
			bigErr = err
			return
		}
		for i := range 100_000 {
			t := bigFirst.Add(time.Duration(i) * time.Second)
			status := "succeeded"
			if i%10 == 3 {
				status = "failed"
			}
			var batch any
			var line any
			if i%5 == 0 {
				batch, line = fmt.Sprintf("b%d", i%4), i/5+1
			}
			_, err := ins.Exec(fmt.Sprintf("%s-%06d", t.Format("20060102T150405"), i), batch, line, fmt.Sprintf("wf%d", i%7), status,
				t.Format(timeLayout), t.Add(1200*time.Millisecond).Format(timeLayout), `{"total_tokens":1200,"cost":{"amount":0.01,"currency":"USD"}}`)
			if err != nil {
				bigErr = err
				return
			}
		}
		bigErr = tx.Commit()
	})
	if bigErr != nil {
		b.Fatal(bigErr)
	}
	return bigPath
}

func benchGet(b *testing.B, f *fixture, target string) {
	b.Helper()
	rec := f.get(target)
	if rec.Code != http.StatusOK {
		b.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
	}
	b.ResetTimer()
	for range b.N {
		if rec := f.get(target); rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

func BenchmarkRunsPage(b *testing.B) {
	path := bigStore(b)
	f := openFixture(b, path, nil, Config{})
	deep := bigFirst.Add(1000 * time.Second) // the 99,000th newest run's page
	for _, c := range []struct{ name, target string }{
		{"first-page", "/"},
		{"deep-page", fmt.Sprintf("/?before=%d~%s-%06d", deep.UnixNano(), deep.Format("20060102T150405"), 1000)},
		{"failed", "/?status=failed"},
		{"workflow-since", "/?workflow=wf3&since=" + bigFirst.Add(90_000*time.Second).Format(time.RFC3339)},
		{"batch", "/?batch=b2"},
		{"api", "/api/runs"},
	} {
		b.Run(c.name, func(b *testing.B) { benchGet(b, f, c.target) })
	}
}

// bigRun records a run of 500 steps (50 layers of 10, each step needing
// one of the layer before) from a workflow file on disk, so that the graph
// has its needs.
func bigRun(b *testing.B) *fixture {
	dir := b.TempDir()
	var y strings.Builder
	y.WriteString("name: big\nsteps:\n")
	for i := range 500 {
		fmt.Fprintf(&y, "  - id: s%03d\n    run: \"true\"\n", i)
		if i >= 10 {
			fmt.Fprintf(&y, "    needs: [s%03d]\n", i-10)
		}
	}
	file := filepath.Join(dir, "big.yaml")
	os.WriteFile(file, []byte(y.String()), 0o644)
	wf, err := workflows.Load(file)
	if err != nil {
		b.Fatal(err)
	}
	f := newFixture(b, Config{})
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	if err := f.w.CreateRun(ctx, store.Run{ID: "big", Workflow: "big", WorkflowFile: wf.File, WorkflowHash: wf.Hash, StartedAt: t0}); err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		st := store.Step{RunID: "big", StepID: fmt.Sprintf("s%03d", i), Ord: i, Status: engine.StatusSucceeded, Attempts: 1, Output: "ok",
			StartedAt: t0.Add(time.Duration(i) * time.Second), EndedAt: t0.Add(time.Duration(i)*time.Second + 800*time.Millisecond), DurationMS: 800}
		if i >= 450 {
			st.Status, st.EndedAt, st.DurationMS = engine.StatusRunning, time.Time{}, 0
		}
		if err := f.w.SaveStep(ctx, st); err != nil {
			b.Fatal(err)
		}
		f.w.AppendEvent(store.Event{RunID: "big", StepID: st.StepID, Type: "step_start", Time: st.StartedAt, Fields: map[string]any{"attempt": 1}})
		if i < 450 {
			f.w.AppendEvent(store.Event{RunID: "big", StepID: st.StepID, Type: "turn_end", Time: st.EndedAt.Add(-100 * time.Millisecond), Fields: map[string]any{}})
			f.w.AppendEvent(store.Event{RunID: "big", StepID: st.StepID, Type: "step_end", Time: st.EndedAt, Fields: map[string]any{"status": "succeeded"}})
		}
	}
	if err := f.w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return f
}

func BenchmarkRunPage500Steps(b *testing.B) {
	f := bigRun(b)
	body := f.get("/runs/big").Body.String()
	if n := strings.Count(body, `class="node state-`); n != 500 {
		b.Fatalf("%d nodes drawn, want 500", n)
	}
	b.Run("page", func(b *testing.B) { benchGet(b, f, "/runs/big") })
	b.Run("graph", func(b *testing.B) { benchGet(b, f, "/runs/big/graph") })
}

// BenchmarkLiveUpdate measures one event committed to the store by a
// writer (as acpflow run commits them) until an SSE client of the server
// reads the change: ns/op is the latency.
func BenchmarkLiveUpdate(b *testing.B) {
	f := newFixture(b, Config{})
	f.addRun(b, "r1", time.Now(), engine.StatusRunning, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.srv.Serve(ctx, ln)
	req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	changes := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: change" {
				changes <- struct{}{}
			}
		}
	}()
	var worst time.Duration
	b.ResetTimer()
	for i := range b.N {
		for len(changes) > 0 {
			<-changes
		}
		start := time.Now()
		f.w.AppendEvent(store.Event{RunID: "r1", StepID: "s", Type: "step_update", Time: start, Fields: map[string]any{"kind": "agent_message_chunk", "text": fmt.Sprint(i)}})
		if err := f.w.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		select {
		case <-changes:
		case <-time.After(10 * time.Second):
			b.Fatal("no change event within 10 s")
		}
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}
