package main

// Browser tests of `acpflow ui`: the real binary serving a real store,
// driven by a real headless Chromium (Debian's chromium) through chromedp.
// They wait on the page's DOM changing, never on time.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "also save the UI tests' screenshots as docs/images/ui-*.png")

// browserPath is Chromium's binary, or "" when there is none; with
// ACPFLOW_REQUIRE_BROWSER=1 (CI) a missing browser fails the test.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ACPFLOW_REQUIRE_BROWSER") == "1" {
		t.Fatal("no chromium on PATH, and ACPFLOW_REQUIRE_BROWSER=1: install it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium); set ACPFLOW_REQUIRE_BROWSER=1 to fail instead")
	return ""
}

// newBrowser is a headless Chromium tab; a hang guard bounds the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := browserPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	return bctx
}

// screenshot saves the page to $ACPFLOW_ARTIFACTS (else a directory of
// its own, logged), and with -update-screenshots to docs/images/ui-NAME.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		// Chromium refuses a full-page capture while a page is being laid
		// out anew ("0 width"); the viewport's is enough then.
		png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("ACPFLOW_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "acpflow-ui-screenshots")
	}
	os.MkdirAll(dir, 0o755)
	p := filepath.Join(dir, "ui-"+name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	if *updateScreenshots {
		if err := os.WriteFile(filepath.Join(repoRoot(t), "docs", "images", "ui-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// do runs browser actions, failing the test with what it was doing.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// The hostile text an agent answers with: were it markup, it would set
// the page's title and a global.
const (
	hostileScript = `<script>document.title="pwned";window.pwned=1</script>`
	hostileImg    = `<img src=x onerror="document.title='pwned';window.pwned=2">`
)

func TestTheUIShowsRunsLiveAndCancelsARunInABrowser(t *testing.T) {
	browserPath(t) // skip (or fail on CI) before running anything
	// Last of all: acpflow ui, the runs and their agents are gone.
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("readme\n"), 0o644)

	// A finished run whose agent answers with markup, asks twice (one
	// allowed, one rejected) and edits a file without asking.
	hostile := filepath.Join(dir, "hostile.yaml")
	os.WriteFile(hostile, []byte(fmt.Sprintf(`name: hostile
agents:
  evil: {command: %s, args: %s}
policies:
  permission:
    rules:
      - if: tool.kind == "read"
        then: allow
    default: reject
  unasked: record
steps:
  - id: answer
    uses: acp-subagent
    with: {agent: evil, prompt: "say something"}
`, testAgent, agentArgs("-chunk", hostileScript, "-chunk", " and "+hostileImg,
		"-permission", "read:README.md", "-permission", "execute:rm -rf <b>build</b>", "-unasked", "edit:notes.md"))), 0o644)
	cmd := exec.Command(acpflowBin, "run", hostile, "--state", state)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the hostile run: %v\n%s", err, out)
	}

	// And a batch of three such runs.
	lines := filepath.Join(dir, "lines.jsonl")
	os.WriteFile(lines, []byte("{}\n{}\n{}\n"), 0o644)
	cmd = exec.Command(acpflowBin, "run", hostile, "--inputs", lines, "--state", state)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the batch: %v\n%s", err, out)
	}

	ui := startUI(t, state)
	ctx := newBrowser(t)
	openPrintedLink(t, ctx, ui)

	t.Run("the runs page lists runs and shows a new one live", func(t *testing.T) {
		do(t, ctx, "load the runs page", chromedp.Navigate(ui.url+"/"),
			chromedp.WaitReady(`tr.run.status-succeeded`),
			chromedp.WaitReady(`tr.batch.status-succeeded`))
		batch, err := chromedp.Run(ctx, chromedp.TextContent(`tr.batch`))
		if err != nil || !strings.Contains(batch, "3/3 (100%)") || !strings.Contains(batch, "3 (0 running)") {
			t.Errorf("the batch's row: %q %v; want 3 of 3 lines done", batch, err)
		}
		// A run that stays in flight: its middle step's agent never
		// answers its prompt until cancelled.
		record := filepath.Join(dir, "slow-record.jsonl")
		slow := filepath.Join(dir, "slow.yaml")
		os.WriteFile(slow, []byte(fmt.Sprintf(`name: slow
agents:
  quick: {command: %s, args: %s}
  slow: {command: %s, args: %s}
steps:
  - id: first
    uses: acp-subagent
    with: {agent: quick, prompt: hi}
  - id: wait
    needs: [first]
    uses: acp-subagent
    with: {agent: slow, prompt: hi}
  - id: last
    needs: [wait]
    uses: acp-subagent
    with: {agent: quick, prompt: bye}
`, testAgent, agentArgs("-chunk", "quick answer"), testAgent, agentArgs("-record", record, "-prompt-hang", "-grandchild"))), 0o644)
		run := exec.Command(acpflowBin, "run", slow, "--state", state)
		run.Dir = dir
		var runErr strings.Builder
		run.Stderr = &runErr
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		var runExit error
		go func() { runExit = run.Wait(); close(exited) }()
		t.Cleanup(func() {
			select {
			case <-exited:
			default:
				run.Process.Kill()
				<-exited
			}
		})

		// Without a reload, the new run appears, running.
		do(t, ctx, "see the new run appear live", chromedp.WaitReady(`tr.run.status-running a.run-link`))
		screenshot(t, ctx, "runs")
		do(t, ctx, "open the running run", chromedp.Click(`tr.run.status-running a.run-link`),
			chromedp.WaitReady(`#run-status[data-status="running"]`))

		// The graph: first done, wait running, last pending.
		do(t, ctx, "see the graph while it runs",
			chromedp.WaitReady(`g#node-first[data-state="succeeded"]`),
			chromedp.WaitReady(`g#node-wait[data-state="running"]`),
			chromedp.WaitReady(`g#node-last[data-state="pending"]`))
		screenshot(t, ctx, "run")

		// Cancel from the page: the run's processes go, and the page says so.
		// The button's own click handler, as a user's click runs it (a
		// synthesized mouse click can land while a live update swaps the
		// button for its fresh copy).
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("cancel").click(), true`)); err != nil {
			t.Fatalf("click cancel: %v", err)
		}
		do(t, ctx, "see the run cancelled",
			chromedp.WaitReady(`#run-status[data-status="cancelled"]`),
			chromedp.WaitReady(`g#node-wait[data-state="cancelled"]`),
			chromedp.WaitReady(`g#node-last[data-state="skipped"]`))
		screenshot(t, ctx, "run-cancelled")
		do(t, ctx, "see the answer to cancel", chromedp.WaitReady(`#cancel-result:not(:empty)`))
		msg, err := chromedp.Run(ctx, chromedp.TextContent(`#cancel-result`))
		if err != nil || !strings.Contains(msg, "interrupted acpflow process") {
			t.Errorf("cancel result %q %v", msg, err)
		}
		<-exited
		var ee *exec.ExitError
		if !errors.As(runExit, &ee) || ee.ExitCode() != 130 {
			t.Errorf("the cancelled run's acpflow exited %v, want 130 as after Ctrl-C\n%s", runExit, runErr.String())
		}
		if !hasEvent(t, record, "cancel") {
			t.Error("the slow agent never got session/cancel")
		}
		assertAgentsGone(t, record)

		// A second cancel is refused: the run is not running.
		res, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](fmt.Sprintf(
			`fetch("/api/runs/%s/cancel", {method: "POST"}).then(async r => ({status: r.status, body: await r.json()}))`,
			strings.TrimPrefix(mustLocation(t, ctx), ui.url+"/runs/")), chromedp.EvalAwaitPromise))
		if err != nil || res["status"] != float64(409) {
			t.Errorf("second cancel: %v %v, want 409", res, err)
		}
	})

	t.Run("a step page shows the transcript and decisions, and agent markup is only text", func(t *testing.T) {
		do(t, ctx, "open the hostile run", chromedp.Navigate(ui.url+"/?workflow=hostile"),
			chromedp.Click(`tr.run a.run-link`),
			chromedp.WaitReady(`g#node-answer[data-state="succeeded"]`))
		do(t, ctx, "open its step", chromedp.Click(`#steps a[href$="/steps/answer"]`),
			chromedp.WaitReady(`#transcript .kind-message`))
		screenshot(t, ctx, "step")
		out, err := chromedp.Run(ctx, chromedp.TextContent(`#output`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, hostileScript) || !strings.Contains(out, hostileImg) {
			t.Errorf("the output is not shown literally: %q", out)
		}
		said, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#transcript .agent-text")).map(e => e.textContent).join("")`))
		if err != nil || !strings.Contains(said, hostileScript) {
			t.Errorf("the transcript's agent message: %q %v", said, err)
		}
		// No element came from the agent's text, no script of it ran.
		verdict, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[
			document.title,
			String(window.pwned),
			String(document.querySelectorAll("main script, main img").length),
			String(document.querySelectorAll("#transcript .kind-message").length)].join("|")`))
		if err != nil {
			t.Fatal(err)
		}
		if parts := strings.Split(verdict, "|"); parts[0] == "pwned" || parts[1] != "undefined" || parts[2] != "0" || parts[3] == "0" {
			t.Errorf("title|window.pwned|elements|messages = %s: agent text became markup", verdict)
		}
		// Every decision inline: allowed, rejected, and the unasked edit marked.
		do(t, ctx, "see the decisions",
			chromedp.WaitReady(`#decisions tr.perm.decision-allow`),
			chromedp.WaitReady(`#decisions tr.perm.decision-reject`),
			chromedp.WaitReady(`#decisions tr.perm.unasked`),
			chromedp.WaitReady(`#transcript .kind-tool table.perms tr.perm`))
		rejected, err := chromedp.Run(ctx, chromedp.TextContent(`#decisions tr.perm.decision-reject`))
		if err != nil || !strings.Contains(rejected, "rm -rf <b>build</b>") || !strings.Contains(rejected, "default") {
			t.Errorf("the rejected request's row: %q %v", rejected, err)
		}
		unasked, _ := chromedp.Run(ctx, chromedp.TextContent(`#decisions tr.perm.unasked`))
		if !strings.Contains(unasked, "unasked") || !strings.Contains(unasked, "would reject") {
			t.Errorf("the unasked row: %q", unasked)
		}
	})
}

func TestTheUIsWhatIfPageShowsTheDecisionsAPolicyWouldChange(t *testing.T) {
	browserPath(t)
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	state := recordAskingRun(t, t.TempDir())
	strict := "permission:\n  rules:\n    - if: tool.kind == \"execute\"\n      then: reject\n      reason: no commands\n  default: allow\n"

	ui := startUI(t, state)
	ctx := newBrowser(t)
	openPrintedLink(t, ctx, ui)
	// A path where the text goes is text that is not a policy: the page
	// says so, and shows nothing of the file.
	do(t, ctx, "give a path", chromedp.Navigate(ui.url+"/whatif"),
		chromedp.SetValue(`textarea[name="policy"]`, "/etc/passwd"),
		chromedp.Submit(`textarea[name="policy"]`),
		chromedp.WaitReady(`#whatif-error`))
	if msg, err := chromedp.Run(ctx, chromedp.TextContent(`#whatif-error`)); err != nil || strings.Contains(msg, "root:") || !strings.Contains(msg, "not a file's path") {
		t.Errorf("the error for a path: %q %v", msg, err)
	}
	do(t, ctx, "test the stricter policy, pasted", chromedp.Navigate(ui.url+"/whatif"),
		chromedp.SetValue(`input[name="runs"]`, "workflow=asks"),
		chromedp.SetValue(`textarea[name="policy"]`, strict),
		chromedp.Submit(`textarea[name="policy"]`),
		chromedp.WaitReady(`#whatif-totals`))
	screenshot(t, ctx, "whatif")
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.whatif tbody tr")).map(r => r.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !strings.Contains(rows[0], "make deploy") || !strings.Contains(rows[0], "reject") {
		t.Errorf("changed rows %q, want the one execute request, now rejected", rows)
	}
	totals, _ := chromedp.Run(ctx, chromedp.TextContent(`#whatif-totals`))
	if !strings.Contains(totals, "1 changed") {
		t.Errorf("totals %q", totals)
	}
}

// openPrintedLink shows that the browser gets nothing without the token,
// then opens the link `acpflow ui` printed: the browser keeps a cookie
// its scripts cannot read and lands on the address without the token,
// and every later page is reached with the cookie alone.
func openPrintedLink(t *testing.T, ctx context.Context, ui *uiServer) {
	t.Helper()
	do(t, ctx, "open the page without the token", chromedp.Navigate(ui.url+"/"), chromedp.WaitReady(`body`))
	if body, err := chromedp.Run(ctx, chromedp.TextContent(`body`)); err != nil || !strings.Contains(body, "needs its token") || strings.Contains(body, "status-") {
		t.Fatalf("the page without the token: %q %v, want it refused", body, err)
	}
	do(t, ctx, "open the printed link", chromedp.Navigate(ui.link), chromedp.WaitReady(`header.top`))
	if loc := mustLocation(t, ctx); strings.Contains(loc, "token") {
		t.Errorf("the address %s still carries the token", loc)
	}
	if full, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(full, ui.token) {
		t.Errorf("the address %q still carries the token (%v)", full, err)
	}
	if c, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || strings.Contains(c, ui.token) {
		t.Errorf("document.cookie = %q (%v): the page's scripts can read the token", c, err)
	}
}

func mustLocation(t *testing.T, ctx context.Context) string {
	t.Helper()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitN(loc, "?", 2)[0]
}
