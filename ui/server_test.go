package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/store"
	"github.com/acpflow/acpflow/steps"
)

func TestEveryAnswerCarriesTheSafetyHeaders(t *testing.T) {
	f := newFixture(t, Config{})
	f.srv.hosts = allowedHosts("127.0.0.1:8080")
	for _, path := range []string{"/", "/api/runs", "/no/such/page", "/assets/app.js"} {
		rec := f.get(path)
		h := rec.Header()
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", path)
		}
	}
}

func TestAnotherHostOrAChangeFromAnywhereButThePageIsRefused(t *testing.T) {
	f := newFixture(t, Config{})
	f.addRun(t, "r1", time.Now(), engine.StatusSucceeded, "")
	f.srv.hosts = allowedHosts("127.0.0.1:8080")
	if rec := f.get("/", [2]string{"Host", "localhost:8080"}); rec.Code != http.StatusOK {
		t.Errorf("localhost: %d", rec.Code)
	}
	// DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
	if rec := f.get("/api/runs", [2]string{"Host", "evil.example:8080"}); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("another Host: %d, want 421", rec.Code)
	}
	for name, h := range map[string][][2]string{
		"no Origin (curl, a sandboxed agent)":   nil,
		"no Origin, cross-site":                 {{"Sec-Fetch-Site", "cross-site"}},
		"no Origin, same-origin says the agent": {{"Sec-Fetch-Site", "same-origin"}},
		"another host":                          {{"Origin", "http://evil.example"}},
		"another port":                          {{"Origin", "http://127.0.0.1:9999"}},
		"another name of loopback":              {{"Origin", "http://localhost:8080"}},
		"another scheme":                        {{"Origin", "https://127.0.0.1:8080"}},
		"an opaque origin":                      {{"Origin", "null"}},
		"a path after the origin":               {{"Origin", "http://127.0.0.1:8080/x"}},
		"user info":                             {{"Origin", "http://u@127.0.0.1:8080"}},
	} {
		rec := f.do(http.MethodPost, "/api/runs/r1/cancel", h...)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "Origin header must be http://127.0.0.1:8080") {
			t.Errorf("a POST with %s: %d %s, want 403 saying which Origin", name, rec.Code, rec.Body)
		}
	}
	// The page's own POST reaches the handler: the run is not running.
	rec := f.do(http.MethodPost, "/api/runs/r1/cancel", [2]string{"Origin", "http://127.0.0.1:8080"})
	if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "is not running: it succeeded") {
		t.Errorf("cancel of a finished run: %d %s, want 409 saying so", rec.Code, rec.Body)
	}
	// Without the token, the same-origin POST is refused first.
	rec = f.do(http.MethodPost, "/api/runs/r1/cancel", [2]string{"Origin", "http://127.0.0.1:8080"}, [2]string{"Authorization", ""})
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a same-origin POST without the token: %d, want 401", rec.Code)
	}
}

func TestEveryRequestNeedsTheTokenAndTheURLOneBecomesACookie(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret-s3cret-s3cret"})
	f.addRun(t, "r1", time.Now(), engine.StatusFailed, "the secret error of r1")
	for _, path := range []string{"/", "/runs/r1", "/runs/r1/steps/s", "/runs/r1/graph", "/whatif", "/events", "/api/runs", "/api/runs/r1", "/assets/app.js"} {
		for name, auth := range map[string][2]string{
			"none":                 {"Authorization", ""},
			"a wrong Bearer":       {"Authorization", "Bearer wrong"},
			"a prefix of it":       {"Authorization", "Bearer s3cret"},
			"not Bearer":           {"Authorization", "Basic s3cret-s3cret-s3cret"},
			"a wrong cookie":       {"Cookie", CookieName + "=wrong"},
			"another cookie named": {"Cookie", "token=s3cret-s3cret-s3cret"},
		} {
			rec := f.get(path, auth)
			if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), "r1") || !strings.Contains(rec.Body.String(), "open the address `acpflow ui` printed") {
				t.Errorf("%s with %s: %d %q, want 401 saying how to get in, and nothing else", path, name, rec.Code, rec.Body)
			}
		}
		if rec := f.get(path+"?token=wrong", [2]string{"Authorization", ""}); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 {
			t.Errorf("%s?token=wrong: %d, cookies %v; want 401 and no cookie", path, rec.Code, rec.Result().Cookies())
		}
	}
	if rec := f.get("/api/runs", [2]string{"Authorization", ""}); rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("the API's 401 is %q, want JSON", rec.Header().Get("Content-Type"))
	}
	if rec := f.get("/api/runs", [2]string{"Authorization", "Bearer s3cret-s3cret-s3cret"}); rec.Code != http.StatusOK {
		t.Errorf("Bearer: %d", rec.Code)
	}
	rec := f.get("/?status=failed&token=s3cret-s3cret-s3cret", [2]string{"Authorization", ""})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/?status=failed" {
		t.Fatalf("?token=: %d to %q, want 303 to the address without it", rec.Code, rec.Header().Get("Location"))
	}
	c := rec.Result().Cookies()
	if len(c) != 1 || c[0].Name != CookieName || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" {
		t.Fatalf("cookie %+v, want one HttpOnly SameSite=Strict for /", c)
	}
	if rec := f.get("/", [2]string{"Cookie", CookieName + "=s3cret-s3cret-s3cret"}); rec.Code != http.StatusOK {
		t.Errorf("with the cookie: %d", rec.Code)
	}
	// The redirect stays on this server whatever the path says.
	for _, path := range []string{"//evil.example/", "/\\evil.example/"} {
		rec := f.get(path+"?token=s3cret-s3cret-s3cret", [2]string{"Authorization", ""})
		loc := rec.Header().Get("Location")
		if u, err := url.Parse(strings.ReplaceAll(loc, "\\", "/")); rec.Code != http.StatusSeeOther || err != nil || u.Host != "" || !strings.HasPrefix(loc, "/") {
			t.Errorf("%s?token=: %d to %q, want 303 to a path of this server", path, rec.Code, loc)
		}
	}
	// A POST does not trade ?token= for a cookie, nor pass with it.
	rec = f.do(http.MethodPost, "/api/runs/r1/cancel?token=s3cret-s3cret-s3cret", [2]string{"Authorization", ""}, [2]string{"Origin", "http://127.0.0.1:8080"})
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a POST with ?token=: %d, want 401", rec.Code)
	}
}

func TestNewRefusesAServerWithoutAToken(t *testing.T) {
	if !IsLoopback("127.0.0.1:1") || !IsLoopback("[::1]:1") || !IsLoopback("localhost:1") || IsLoopback("0.0.0.0:1") || IsLoopback("192.168.1.2:1") {
		t.Fatal("IsLoopback")
	}
	f := newFixture(t, Config{})
	if _, err := New(Config{Store: f.ui}); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Errorf("New without a token: %v", err)
	}
	a, b := NewToken(), NewToken()
	if a == b || len(a) < 26 {
		t.Errorf("NewToken: %q then %q, want two different tokens of 128 bits", a, b)
	}
}

func TestAgentTextIsEscapedOnEveryPage(t *testing.T) {
	f := newFixture(t, Config{})
	evil := `<script>alert(1)</script><img src=x onerror=alert(2)>`
	f.addRun(t, "r1", time.Now(), engine.StatusFailed, evil)
	for _, path := range []string{"/", "/runs/r1", "/runs/r1/steps/s"} {
		body := f.get(path).Body.String()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("%s: agent text became markup", path)
		}
	}
	if body := f.get("/runs/r1/steps/s").Body.String(); !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the step page does not show the error as text")
	}
}

func TestTheAPIServesTheShapesOfRunsJSONAndShowJSONAndPagesByCursor(t *testing.T) {
	f := newFixture(t, Config{})
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := range 120 {
		// Every other run at the same instant: the cursor must tell them apart by id.
		f.addRun(t, fmt.Sprintf("r%03d", i), t0.Add(time.Duration(i/2)*time.Second), engine.StatusSucceeded, "")
	}
	seen := map[string]bool{}
	next := "/api/runs?n=50"
	pages := 0
	for next != "" {
		rec := f.get(next)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", next, rec.Code, rec.Body)
		}
		sc := bufio.NewScanner(rec.Body)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			id := m["run_id"].(string)
			if seen[id] {
				t.Fatalf("run %s on two pages", id)
			}
			seen[id] = true
		}
		pages++
		next, _ = strings.CutPrefix(strings.TrimSuffix(strings.SplitN(rec.Header().Get("Link"), ">", 2)[0], ">"), "<")
	}
	if len(seen) != 120 || pages != 3 {
		t.Errorf("%d runs on %d pages, want 120 on 3", len(seen), pages)
	}
	// One run: exactly show --json's bytes.
	d, err := f.ui.GetRun(context.Background(), "r007")
	if err != nil {
		t.Fatal(err)
	}
	els, err := f.ui.Elements(context.Background(), "r007")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(runs.DetailJSON(d, els), "", "  ")
	if got := f.get("/api/runs/r007").Body.String(); got != string(want)+"\n" {
		t.Errorf("/api/runs/r007:\n%s\nwant\n%s", got, want)
	}
	if rec := f.get("/api/runs?status=bogus"); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "want one of running, waiting, succeeded, failed, cancelled") {
		t.Errorf("a bad status: %d %s", rec.Code, rec.Body)
	}
	if rec := f.get("/api/runs/nosuchrun"); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown run: %d", rec.Code)
	}
}

func TestAStoreThatIsNotThereIsAClearError(t *testing.T) {
	_, err := runs.OpenReadOnly("/nonexistent/dir/state.db")
	if err == nil || !strings.Contains(err.Error(), "no state store at /nonexistent/dir/state.db") {
		t.Errorf("err = %v", err)
	}
}

func TestTheRunPageShowsForEachElementsAndRetries(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	now := time.Now()
	if err := f.w.CreateRun(ctx, store.Run{ID: "r", Workflow: "wf", StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := f.w.SaveStep(ctx, store.Step{RunID: "r", StepID: "each", Status: engine.StatusRunning, Output: []any{"", "", ""}, StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	ev := func(typ string, fields map[string]any) {
		f.w.AppendEvent(store.Event{RunID: "r", StepID: "each", Type: typ, Time: time.Now(), Fields: fields})
	}
	ev("step_start", map[string]any{"attempt": 1, "index": 0, "elements": 3})
	ev("step_start", map[string]any{"attempt": 1, "index": 1, "elements": 3})
	ev("step_update", map[string]any{"kind": "element_end", "index": 0, "status": "succeeded", "attempts": 1})
	ev("step_update", map[string]any{"kind": "retry", "index": 1, "after_ms": 10, "error": "boom"})
	ev("step_start", map[string]any{"attempt": 2, "index": 1, "elements": 3})
	ev("step_update", map[string]any{"kind": "element_end", "index": 1, "status": "failed", "attempts": 2, "error": "boom"})
	if err := f.w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	body := f.get("/runs/r").Body.String()
	for _, want := range []string{`id="node-each"`, `data-state="running"`, "1/3 done · 1 failed · attempt 2", "each[1] #2", "each[1] #1"} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
}

func TestTheStepPageListsWhatTheSandboxRefused(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	now := time.Now()
	if err := f.w.CreateRun(ctx, store.Run{ID: "r", Workflow: "wf", StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	sb := &steps.SandboxRecord{Enforced: true, Network: steps.NetworkList, Allow: []string{"ok.example"}, DeniedMore: 3,
		Denied: []steps.Denial{
			{By: steps.DeniedByProxy, Op: "connect", Host: "evil.example:443", Count: 2},
			{By: steps.DeniedByLandlock, Op: "read", Path: "/home/u/.ssh/<id>", Count: 1},
		},
		KernelDenials: "the kernel's audit is off"}
	if err := f.w.SaveStep(ctx, store.Step{RunID: "r", StepID: "s", Status: engine.StatusSucceeded, Attempts: 1, StartedAt: now, Sandbox: sb}); err != nil {
		t.Fatal(err)
	}
	body := f.get("/runs/r/steps/s").Body.String()
	for _, want := range []string{
		`<td>proxy</td><td>connect</td><td><code>evil.example:443</code></td><td>2</td>`,
		`<td>landlock</td><td>read</td><td><code>/home/u/.ssh/&lt;id&gt;</code></td><td>1</td>`,
		"… and 3 more refusals, of other kinds.",
		"The kernel's refusals are not listed: the kernel&#39;s audit is off",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the step page lacks %q", want)
		}
	}
}

func TestAnAnswerThatIsNeitherAllowNorRejectIsABadRequest(t *testing.T) {
	f := newFixture(t, Config{})
	for name, body := range map[string]string{
		"another decision": `{"decision": "maybe"}`,
		"no decision":      `{}`,
		"another scope":    `{"decision": "allow", "for": "ever"}`,
		"not JSON":         `allow`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/approvals/ap-1", strings.NewReader(body))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Authorization", "Bearer "+f.srv.cfg.Token)
		req.Header.Set("Origin", "http://127.0.0.1:8080")
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, rec.Code, rec.Body)
		}
	}
}
