package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// runningStep records run r running, with its step s running since
// started, and returns a function that appends s's events.
func runningStep(t *testing.T, f *fixture, started time.Time, perms ...store.Permission) func(typ string, fields map[string]any) {
	t.Helper()
	ctx := context.Background()
	if err := f.w.CreateRun(ctx, store.Run{ID: "r", Workflow: "wf", StartedAt: started}); err != nil {
		t.Fatal(err)
	}
	if err := f.w.SaveStep(ctx, store.Step{RunID: "r", StepID: "s", Status: engine.StatusRunning, Attempts: 1, StartedAt: started, Permissions: perms}); err != nil {
		t.Fatal(err)
	}
	return func(typ string, fields map[string]any) {
		f.w.AppendEvent(store.Event{RunID: "r", StepID: "s", Type: typ, Time: time.Now(), Fields: fields})
	}
}

func flush(t *testing.T, f *fixture) {
	t.Helper()
	if err := f.w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestARunningStepsPageShowsWhatItHasWrittenSoFarAndForHowLong(t *testing.T) {
	f := newFixture(t, Config{})
	ev := runningStep(t, f, time.Now().Add(-90*time.Second))
	ev("step_start", map[string]any{"attempt": 1})
	ev("step_update", map[string]any{"kind": "agent_message_chunk", "text": "the first attempt's <b>words</b>"})
	ev("step_update", map[string]any{"kind": "retry", "after_ms": 10, "error": "boom"})
	ev("step_start", map[string]any{"attempt": 2})
	ev("step_update", map[string]any{"kind": "agent_message_chunk", "text": "Reading the <code>"})
	ev("step_update", map[string]any{"kind": "usage", "used": 3})
	ev("step_update", map[string]any{"kind": "agent_message_chunk", "text": "</code> now."})
	flush(t, f)

	body := f.get("/runs/r/steps/s").Body.String()
	for _, want := range []string{
		`<section id="live" data-live>`, "Output so far", "attempt 2",
		`<pre class="output live-output">Reading the &lt;code&gt;&lt;/code&gt; now.</pre>`,
		`running for <span class="elapsed" id="step-elapsed" data-since="`, ">1m30s</span>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the running step's page lacks %q", want)
		}
	}
	if strings.Contains(body, "first attempt") {
		t.Error("the page shows the text of an attempt before the running one")
	}

	// A shell step's stdout is its output as well; past 64 KiB only the
	// newest is read, and the page says the beginning is cut.
	line := strings.Repeat("x", 1023) + "\n"
	for i := 0; i < 100; i++ {
		ev("step_update", map[string]any{"kind": "stdout", "text": line})
	}
	ev("step_update", map[string]any{"kind": "stdout", "text": "the newest line\n"})
	flush(t, f)
	body = f.get("/runs/r/steps/s").Body.String()
	m := regexp.MustCompile(`(?s)<pre class="output live-output">(.*?)</pre>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no live output on the page")
	}
	if !strings.HasPrefix(m[1], "… ") || !strings.HasSuffix(m[1], "the newest line\n") || len(m[1]) > liveOutputMax+len("… ") {
		t.Errorf("the live output of 100 KiB: %d bytes, from %.20q to %.20q; want the newest 64 KiB marked cut", len(m[1]), m[1], m[1][max(0, len(m[1])-20):])
	}
}

// A run waiting for a person's answer is running: its step page shows
// the output so far, not a step its acpflow ended.
func TestAWaitingRunsStepPageShowsItRunning(t *testing.T) {
	f := newFixture(t, Config{})
	ev := runningStep(t, f, time.Now().Add(-time.Minute))
	ev("step_start", map[string]any{"attempt": 1, "index": 0, "elements": 2, "item": "a"})
	ev("step_update", map[string]any{"kind": "agent_message_chunk", "text": "asking first"})
	flush(t, f)
	now := time.Now()
	if err := f.w.CreateApproval(context.Background(), store.Approval{ID: "ap-1", RunID: "r", StepID: "s", AnswerKey: "k",
		Request: &policies.PermissionRequest{}, CreatedAt: now, Deadline: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	body := f.get("/runs/r/steps/s").Body.String()
	if !strings.Contains(body, "asking first") || !strings.Contains(body, "not started yet") || strings.Contains(body, "cancelled") {
		t.Errorf("the step page of a waiting run does not show it running:\n%s", body)
	}
}

func TestAStepThatEndedShowsNoLiveOutput(t *testing.T) {
	f := newFixture(t, Config{})
	f.addRun(t, "r1", time.Now(), engine.StatusSucceeded, "")
	body := f.get("/runs/r1/steps/s").Body.String()
	if strings.Contains(body, "Output so far") || !strings.Contains(body, `<section id="live" data-live></section>`) {
		t.Error("an ended step's page shows live output, or lacks the empty section a live update swaps")
	}
}

func TestForEachElementsAreListedInIndexOrderWithTheirItems(t *testing.T) {
	f := newFixture(t, Config{})
	ev := runningStep(t, f, time.Now())
	start := func(index, attempt int, item any) {
		b, _ := json.Marshal(item)
		var v any
		json.Unmarshal(b, &v)
		ev("step_start", map[string]any{"attempt": attempt, "index": index, "elements": 4, "item": v})
	}
	start(2, 1, "src/c.go")
	start(0, 1, map[string]any{"path": "src/<a>.go"})
	start(1, 1, "src/b.go")
	ev("step_update", map[string]any{"kind": "element_end", "index": 1, "status": "succeeded", "attempts": 1, "duration_ms": 1500})
	ev("step_update", map[string]any{"kind": "element_end", "index": 0, "status": "failed", "attempts": 1, "error": "boom"})
	flush(t, f)

	body := f.get("/runs/r/steps/s").Body.String()
	rows := regexp.MustCompile(`(?s)<tr class="element status-(\w+)" data-index="(\d)"><td>\d</td><td><code class="item">(.*?)</code>`).FindAllStringSubmatch(body, -1)
	var got []string
	for _, r := range rows {
		got = append(got, r[2]+" "+r[1]+" "+r[3])
	}
	want := []string{`0 failed {&#34;path&#34;:&#34;src/\u003ca\u003e.go&#34;}`, "1 succeeded src/b.go", "2 running src/c.go"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("elements %q, want %q", got, want)
	}
	if !strings.Contains(body, "1 more not started yet.") {
		t.Error("the page does not say one element has not started")
	}
}

func TestTheGraphMarksStepsWithRejectedUnaskedOrPendingDecisions(t *testing.T) {
	for name, c := range map[string]struct {
		pending bool // an approval of the step waits
		perms   []store.Permission
		want    string
	}{
		"allowed only":         {perms: []store.Permission{{Decision: "allow"}}},
		"rejected and unasked": {perms: []store.Permission{{Decision: "allow"}, {Decision: "reject"}, {Decision: "unasked", Would: "allow"}}, want: "rejected unasked"},
		"waiting on a person":  {pending: true, perms: []store.Permission{{Decision: "cancel"}}, want: "pending rejected"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Config{})
			runningStep(t, f, time.Now(), c.perms...)
			if c.pending {
				now := time.Now()
				err := f.w.CreateApproval(context.Background(), store.Approval{ID: "ap-1", RunID: "r", StepID: "s", AnswerKey: "k",
					Request: &policies.PermissionRequest{}, CreatedAt: now, Deadline: now.Add(time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
			}
			body := f.get("/runs/r").Body.String()
			m := regexp.MustCompile(`<g class="node state-running" id="node-s" data-step="s" data-state="running"(?: data-marks="([^"]*)")?>`).FindStringSubmatch(body)
			if m == nil || m[1] != c.want {
				t.Fatalf("the node's marks: %q, want %q", m, c.want)
			}
			for _, mark := range strings.Fields(c.want) {
				if !strings.Contains(body, `<g class="mark mark-`+mark+`">`) || !strings.Contains(body, `<span class="badge mark-`+mark+`">`) {
					t.Errorf("no %s mark drawn on the node and in the steps table", mark)
				}
			}
		})
	}
}

func TestUnknownPagesGetTheUIsOwn404(t *testing.T) {
	f := newFixture(t, Config{})
	f.addRun(t, "r1", time.Now(), engine.StatusSucceeded, "")
	for path, says := range map[string]string{
		"/no/such/page":          "there is no page at /no/such/page",
		"/runs/nope":             "nope",
		"/runs/r1/steps/nope":    `run r1 has no step &#34;nope&#34;`,
		"/runs/r1/steps/s/extra": "there is no page at /runs/r1/steps/s/extra",
		"/%3Cscript%3E":          "there is no page at /&lt;script&gt;",
	} {
		rec := f.get(path)
		body := rec.Body.String()
		if rec.Code != http.StatusNotFound || !strings.Contains(body, `<h1>Not Found</h1>`) || !strings.Contains(body, says) ||
			!strings.Contains(body, `<a class="brand" href="/">acpflow</a>`) || strings.Contains(body, "404 page not found") || strings.Contains(body, "<script>") {
			t.Errorf("%s: %d %q, want the UI's own 404 saying %q", path, rec.Code, body, says)
		}
	}
	rec := f.get("/api/nope")
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), `"error":"acpflow ui: no API at /api/nope`) {
		t.Errorf("/api/nope: %d %s, want a JSON 404", rec.Code, rec.Body)
	}
	// Without the token nothing tells a page that exists from one that does not.
	if rec := f.get("/no/such/page", [2]string{"Authorization", ""}); rec.Code != http.StatusUnauthorized {
		t.Errorf("an unknown page without the token: %d, want 401", rec.Code)
	}
	// ?token= on an unknown page keeps it: the cookie is set and the
	// browser sent on to the page, which is the UI's 404.
	rec = f.get("/no/such/page?token="+testToken, [2]string{"Authorization", ""})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/no/such/page" || !strings.Contains(rec.Header().Get("Set-Cookie"), CookieName+"="+testToken) {
		t.Errorf("?token= on an unknown page: %d %v", rec.Code, rec.Header())
	}
}

func TestTheTimelineHasATimeAxis(t *testing.T) {
	for total, want := range map[time.Duration]string{
		90 * time.Second:        "0 30s 1m 1m30s",
		2 * time.Second:         "0 500ms 1s 1.5s 2s",
		7 * time.Minute:         "0 2m 4m 6m",
		150 * time.Minute:       "0 30m 1h 1h30m 2h 2h30m",
		400 * time.Millisecond:  "0 100ms 200ms 300ms 400ms",
		45*time.Minute + 20*sec: "0 10m 20m 30m 40m",
	} {
		var got []string
		ticks := timeTicks(total, tlLabel, tlBars)
		for _, tk := range ticks {
			got = append(got, tk.Label)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: ticks %q, want %s", total, got, want)
		}
		if ticks[0].X != tlLabel || ticks[len(ticks)-1].X > tlLabel+tlBars {
			t.Errorf("%s: ticks %v outside the bars", total, ticks)
		}
	}
	f := newFixture(t, Config{})
	ev := runningStep(t, f, time.Now().Add(-time.Minute))
	ev("step_start", map[string]any{"attempt": 1})
	flush(t, f)
	body := f.get("/runs/r").Body.String()
	if !strings.Contains(body, `<g class="tl-axis">`) || !strings.Contains(body, `<text class="tick" x="220" y="20" dy="-6">0</text>`) {
		t.Error("the run page's timeline has no time axis")
	}
}

const sec = time.Second
