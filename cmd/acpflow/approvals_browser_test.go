package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The web UI lists a pending request while its step waits, live (it was
// opened before the request came), with the request as the policy saw
// it; approving it in the page reaches the agent as its allow option, and
// the run's page shows the run waiting meanwhile.
func TestTheUIListsAPendingRequestAndApprovingItReachesTheAgent(t *testing.T) {
	browserPath(t)
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	recordShellRun(t, dir, state)
	ui := startUI(t, state)
	ctx := newBrowser(t)
	openPrintedLink(t, ctx, ui)
	do(t, ctx, "open the approvals page", chromedp.Navigate(ui.url+"/approvals"), chromedp.WaitReady(`#approvals`))

	wf := writeWorkflow(t, dir, "name: browse\nagents:\n  demo: {builtin: demo}\n"+fmt.Sprintf(approvalPolicy, "2m", "reject")+
		"steps:\n"+demoStep("clean", "rm -rf build"))
	out := filepath.Join(dir, "result.json")
	run := startRun(t, dir, nil, wf, "--state", state, "--output", out)

	do(t, ctx, "see the request appear live", chromedp.WaitReady(`article.approval button.approve[data-decision="allow"]:not([data-for])`))
	// Read in one evaluation: a live update may replace the element
	// between two protocol calls.
	text := pollText(t, ctx, "the request as shown", `(document.querySelector("article.approval") || {}).textContent || ""`)
	if !strings.Contains(text, "execute") || !strings.Contains(text, "rm -rf build") || !strings.Contains(text, "step clean") ||
		!strings.Contains(text, "asked by rule 1: a command") {
		t.Errorf("the request as shown: %q", text)
	}
	screenshot(t, ctx, "approvals")
	// The API lists it as acpflow approvals --json does (acpflow itself is
	// not run here: its cleanup would find acpflow ui still serving).
	_, _, list := ui.get(t, "GET", "/api/approvals", "Authorization", "Bearer "+ui.token)
	var pending []map[string]any
	if err := json.Unmarshal([]byte(list), &pending); err != nil || len(pending) != 1 {
		t.Fatalf("/api/approvals: %s %v", list, err)
	}
	runID := pending[0]["run_id"].(string)
	do(t, ctx, "see the run waiting", chromedp.Navigate(ui.url+"/runs/"+runID), chromedp.WaitReady(`#run-status[data-status="waiting"]`))
	do(t, ctx, "allow it on the run's page", chromedp.Click(`article.approval button.approve[data-decision="allow"]:not([data-for])`))
	if code := run.wait(t); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, run.stderr.String())
	}
	_, perms := permissionsOf(t, out)
	if p := perms["clean"]; len(p) != 1 || p[0]["option_id"] != "allow-once" || p[0]["answered_by"] != "ui" {
		t.Errorf("records %v; want allow-once answered in the UI", p)
	}
	do(t, ctx, "see the run end live", chromedp.WaitReady(`#run-status[data-status="succeeded"]`))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("article.approval").length`)); err != nil || n != 0 {
		t.Errorf("%d requests still listed (%v) after the answer", n, err)
	}
	do(t, ctx, "open the step", chromedp.Navigate(ui.url+"/runs/"+runID+"/steps/clean"), chromedp.WaitReady(`.answered-by`))
	if by, err := chromedp.Run(ctx, chromedp.TextContent(`.answered-by`)); err != nil || !strings.Contains(by, "answered by ui at") {
		t.Errorf("the step's decision says %q (%v); want who answered and when", by, err)
	}
}
