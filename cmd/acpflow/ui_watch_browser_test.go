package main

// Browser tests of watching a run in `acpflow ui`: a running step's output
// and elapsed time as they come, and every page at a phone's width with
// text that can be read.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// runInBackground starts `acpflow run wf` (startRun); its exit comes on
// the channel, an error saying the exit code and stderr when it failed.
func runInBackground(t *testing.T, dir, wf, state string) <-chan error {
	t.Helper()
	r := startRun(t, dir, nil, wf, "--state", state)
	exited := make(chan error, 1)
	go func() {
		<-r.done
		if r.code != 0 {
			exited <- fmt.Errorf("exit %d\n%s", r.code, r.stderr.String())
			return
		}
		exited <- nil
	}()
	return exited
}

// pollText waits until the page's expression gives a non-empty string.
func pollText(t *testing.T, ctx context.Context, what, expr string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Poll[string](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return s
}

// liveWhileRunning is the text of the step page's live output once it
// holds want while the step is still running ("" until then).
func liveWhileRunning(want string) string {
	return fmt.Sprintf(`(() => {
		const out = document.querySelector("#live .live-output"), st = document.getElementById("step-status");
		return out && st && st.dataset.status === "running" && out.textContent.includes(%q) ? out.textContent : "";
	})()`, want)
}

func TestTheUIShowsARunningStepsOutputWhileItRuns(t *testing.T) {
	browserPath(t)
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	record := filepath.Join(dir, "talk-record.jsonl")
	// An agent that answers a line a second, and a command that counts a
	// line a second, side by side: a long step, shortened.
	wf := filepath.Join(dir, "watch.yaml")
	os.WriteFile(wf, []byte(fmt.Sprintf(`name: watch
agents:
  talker: {command: %s, args: %s}
steps:
  - id: talk
    uses: acp-subagent
    with: {agent: talker, prompt: "talk slowly"}
  - id: count
    run: 'for i in 1 2 3 4 5 6; do echo "counted $i"; sleep 1; done'
`, testAgent, agentArgs("-record", record, "-chunk-every", "1s",
		"-chunk", "line one\n", "-chunk", "line two\n", "-chunk", "line three\n", "-chunk", "line four\n", "-chunk", "line five\n", "-chunk", "line six\n"))), 0o644)

	recordShellRun(t, dir, state) // the store the UI opens
	ui := startUI(t, state)
	ctx := newBrowser(t)
	openPrintedLink(t, ctx, ui)
	exited := runInBackground(t, dir, wf, state)

	do(t, ctx, "open the running run", chromedp.Navigate(ui.url+"/"),
		chromedp.WaitReady(`tr.run.status-running a.run-link`),
		chromedp.Click(`tr.run.status-running a.run-link`),
		chromedp.WaitReady(`#steps a[href$="/steps/talk"]`))
	// The run page's clock of a running step goes on between changes.
	pollText(t, ctx, "a running step's time on the run page", `document.querySelector('#steps tr[data-step="talk"] .elapsed[data-since]') ? "yes" : ""`)

	do(t, ctx, "open the agent's step", chromedp.Click(`#steps a[href$="/steps/talk"]`), chromedp.WaitReady(`#step-status`))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}
	first := pollText(t, ctx, "the agent's first line while it runs", liveWhileRunning("line one"))
	if strings.Contains(first, "line six") {
		t.Fatalf("the first output seen already holds the last line: %q; the test did not see it while it came", first)
	}
	// More comes without a reload, and the clock goes on by itself.
	clock := pollText(t, ctx, "the step's clock", `document.getElementById("step-elapsed") ? document.getElementById("step-elapsed").textContent : ""`)
	pollText(t, ctx, "a later line, live", liveWhileRunning("line three"))
	pollText(t, ctx, "the clock ticking", fmt.Sprintf(`(() => { const c = document.getElementById("step-elapsed"); return c && c.textContent !== %q ? c.textContent : ""; })()`, clock))
	if still, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !still {
		t.Errorf("the page was reloaded (%v): the output must come by the live update", err)
	}
	screenshot(t, ctx, "step-live")

	// The shell step's stdout streams the same way.
	do(t, ctx, "open the shell step", chromedp.Navigate(strings.Replace(mustLocation(t, ctx), "/steps/talk", "/steps/count", 1)), chromedp.WaitReady(`#step-status`))
	pollText(t, ctx, "the command's stdout while it runs", liveWhileRunning("counted 2"))

	if err := <-exited; err != nil {
		t.Fatalf("the run: %v", err)
	}
	// Once it ended, the step shows its output as recorded, and no live part.
	pollText(t, ctx, "the ended step", `(() => {
		const st = document.getElementById("step-status"), out = document.getElementById("output");
		return st.dataset.status === "succeeded" && out && out.textContent.includes("counted 6") && !document.querySelector("#live .live-output") ? "ok" : "";
	})()`)
	assertAgentsGone(t, record)
}

// The pages a phone must show whole: every kind the UI has.
var pageKinds = []struct{ name, path string }{
	{"runs", "/"},
	{"run", "/runs/RUN"},
	{"agent step", "/runs/RUN/steps/answer"},
	{"for-each step", "/runs/RUN/steps/each"},
	{"what-if", "/whatif?runs=all&policy=permission%3A%0A++default%3A+allow%0A"},
	{"unknown page", "/no/such/page/" + strings.Repeat("x", 120)},
	{"unknown run", "/runs/no-such-run"},
	{"unknown step", "/runs/RUN/steps/no-such-step"},
}

// contrastJS lists every piece of text on the page whose colour against
// what is behind it is under 4.5:1 (WCAG AA), as "text: ratio fg on bg".
// What is behind a text is the nearest opaque background up its
// ancestors; in an SVG, the fill of the shape its group draws first.
const contrastJS = `(() => {
	const rgb = s => { const m = s.match(/[\d.]+/g); return m ? m.map(Number) : null; };
	const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
		return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
	const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
	const behind = el => {
		for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
			if (e instanceof SVGElement && e.tagName !== "svg") {
				const shape = e.querySelector(":scope > rect, :scope > circle"), t = el.getBoundingClientRect();
				const x = t.left + t.width / 2, y = t.top + t.height / 2, s = shape && shape.getBoundingClientRect();
				if (s && shape !== el && x >= s.left && x <= s.right && y >= s.top && y <= s.bottom) {
					const f = rgb(getComputedStyle(shape).fill); if (f) return f;
				}
			}
			const bg = rgb(getComputedStyle(e).backgroundColor);
			if (bg && (bg.length < 4 || bg[3] > 0.99)) return bg;
		}
		return [255, 255, 255];
	};
	const bad = [];
	const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		const el = n.parentElement;
		if (!n.textContent.trim() || !el || el.closest("title, script, style") || !el.getClientRects().length) continue;
		const cs = getComputedStyle(el);
		const fg = rgb(el instanceof SVGElement ? cs.fill : cs.color);
		if (!fg) continue;
		const bg = behind(el), r = ratio(fg, bg);
		if (r < 4.5) bad.push(n.textContent.trim().slice(0, 30) + ": " + r.toFixed(2) + " " + fg + " on " + bg);
	}
	return bad;
})()`

func TestEveryPageFitsAPhoneAndItsTextIsReadable(t *testing.T) {
	browserPath(t)
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	long := "/srv/checkouts/" + strings.Repeat("a-very-long-directory-name/", 6) + "file.go"
	// Long words everywhere a page shows the run's data: a command, paths,
	// an answer with no space, items; a rejected and an unasked call mark
	// the node; a failed element and a retry.
	wf := filepath.Join(dir, "long.yaml")
	os.WriteFile(wf, []byte(fmt.Sprintf(`name: long
agents:
  wordy: {command: %s, args: %s}
policies:
  permission: {default: reject}
  unasked: record
steps:
  - id: answer
    uses: acp-subagent
    with: {agent: wordy, prompt: "answer at length"}
  - id: each
    needs: [answer]
    for-each: '[%q, "b.go", "c.go"]'
    run: 'echo ${{ item }}; test ${{ index }} != 2'
`, testAgent, agentArgs("-chunk", strings.Repeat("unbroken", 60), "-permission", "execute:"+long+" --flag="+strings.Repeat("x", 150),
		"-unasked", "edit:"+long), long)), 0o644)
	lines := filepath.Join(dir, "lines.jsonl")
	os.WriteFile(lines, []byte("{}\n{}\n"), 0o644)
	for _, args := range [][]string{{"run", wf, "--state", state}, {"run", wf, "--inputs", lines, "--state", state}} {
		cmd := exec.Command(acpflowBin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("%s succeeded, want its last element failed\n%s", args, out)
		}
	}
	runID := firstRunID(t, acpflow(t, dir, "runs", "--state", state, "--json").stdout)

	ui := startUI(t, state)
	ctx := newBrowser(t)
	openPrintedLink(t, ctx, ui)
	do(t, ctx, "take a phone's width", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, p := range pageKinds {
		do(t, ctx, "open the "+p.name+" page", chromedp.Navigate(ui.url+strings.ReplaceAll(p.path, "RUN", runID)), chromedp.WaitReady(`header.top`))
		w, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if err != nil {
			t.Fatal(err)
		}
		if w[0] > w[1] {
			wide, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("main *")).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest(".scroll, table")).slice(0, 5).map(e => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))`))
			t.Errorf("the %s page scrolls sideways at 390 px: %d px wide (%q)", p.name, w[0], wide)
		}
		bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](contrastJS))
		if err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("the %s page has text under 4.5:1: %q", p.name, bad)
		}
		if p.name == "run" {
			marks, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("node-answer").dataset.marks || ""`))
			if marks != "rejected unasked" {
				t.Errorf("the answer step's node is marked %q, want rejected unasked", marks)
			}
			screenshot(t, ctx, "run-phone")
		}
	}
	// The for-each step lists its elements by index, each with its item.
	do(t, ctx, "open the for-each step", chromedp.Navigate(ui.url+"/runs/"+runID+"/steps/each"), chromedp.WaitReady(`table.elements`))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("tr.element")).map(r => r.dataset.index + " " + r.querySelector("code.item").textContent + " " + r.querySelector(".badge").textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0 " + long + " succeeded", "1 b.go succeeded", "2 c.go failed"}; strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("elements %q, want %q", rows, want)
	}
	// The UI's own 404, with the page's header and a way back.
	do(t, ctx, "open an unknown page", chromedp.Navigate(ui.url+"/runs/no-such-run"), chromedp.WaitReady(`#not-found`))
	if body, err := chromedp.Run(ctx, chromedp.TextContent(`main`)); err != nil || strings.Contains(body, "404 page not found") || !strings.Contains(body, "no-such-run") {
		t.Errorf("the 404 page: %q %v", body, err)
	}
}
