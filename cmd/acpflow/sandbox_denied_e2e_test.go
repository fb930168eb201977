package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/steps"
)

// End to end: the step's sandbox.denied (SPEC §10, issue 36) says what the
// sandbox refused, counted, in the result, `show --json` and `show`. The
// agent, allowed one host, asks the proxy twice for another and once for a
// third, and reaches its listed host once; it also connects directly
// (which Landlock refuses, and which only the audit log can tell).
func TestTheResultCountsWhatTheSandboxRefused(t *testing.T) {
	w := newSandboxWorld(t)
	unlisted, direct := w.unlistedAddr(), w.direct()
	tries := []string{"proxy:" + unlisted, "proxy:" + unlisted, "proxy:" + direct, "proxy:" + w.listedAddr(), "connect:" + direct}
	s := w.run(t, fmt.Sprintf("sandbox:\n  network: [%q]", w.listedAddr()), nil, tries...)
	s.mustSucceed(t)
	s.want(t, map[string]string{"proxy:" + unlisted: "ERR proxy answered 403", "proxy:" + w.listedAddr(): "ok", "connect:" + direct: "ERR EACCES"})
	rec := s.checkEnforced(t, w, "list")

	var fromResult steps.SandboxRecord
	b, _ := json.Marshal(rec)
	if err := json.Unmarshal(b, &fromResult); err != nil {
		t.Fatal(err)
	}
	wantProxy := []steps.Denial{
		{By: "proxy", Op: "connect", Host: unlisted, Count: 2},
		{By: "proxy", Op: "connect", Host: direct, Count: 1},
	}
	checkDenied(t, "the result", fromResult, wantProxy, w.listedAddr(), direct)

	// show --json carries the same record; show prints it under the step.
	state := s.state
	shown := acpflow(t, w.ws, "show", runID(t, s.out), "--json", "--state", state)
	var detail struct {
		Steps map[string]struct {
			Sandbox *steps.SandboxRecord `json:"sandbox"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(shown.stdout), &detail); err != nil || detail.Steps["s"].Sandbox == nil {
		t.Fatalf("show --json: %v\n%s", err, shown.stdout)
	}
	checkDenied(t, "show --json", *detail.Steps["s"].Sandbox, wantProxy, w.listedAddr(), direct)
	text := acpflow(t, w.ws, "show", runID(t, s.out), "--state", state).stdout
	t.Logf("show:\n%s", text)
	for _, line := range []string{
		"denied: connect " + unlisted + " (by proxy), 2 times",
		"denied: connect " + direct + " (by proxy), once",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("show lacks %q:\n%s", line, text)
		}
	}
	if k := fromResult.KernelDenials; k != steps.KernelDenialsAudit && !strings.Contains(text, "the kernel's refusals are not listed: "+k) {
		t.Errorf("show does not say why the kernel's refusals are not listed (%q):\n%s", k, text)
	}
}

// checkDenied checks a record's denied list: the proxy's refusals as
// wanted, never the listed host, and the direct connect Landlock refused
// exactly when the kernel's refusals were read (kernel_denials says which,
// and never nothing).
func checkDenied(t *testing.T, where string, rec steps.SandboxRecord, wantProxy []steps.Denial, listed, direct string) {
	t.Helper()
	var proxy []steps.Denial
	landlock := false
	for _, d := range rec.Denied {
		switch {
		case d.Target() == listed:
			t.Errorf("%s: sandbox.denied holds the listed host: %+v", where, d)
		case d.By == steps.DeniedByProxy:
			proxy = append(proxy, d)
		case d.By == steps.DeniedByLandlock && d.Op == "connect" && d.Address == direct:
			landlock = true
		}
	}
	if !slices.Equal(proxy, wantProxy) {
		t.Errorf("%s: the proxy's refusals in sandbox.denied = %+v, want %+v", where, proxy, wantProxy)
	}
	switch k := rec.KernelDenials; {
	case k == "":
		t.Errorf("%s: sandbox.kernel_denials is empty: it must say whether the kernel's refusals were read", where)
	case k == steps.KernelDenialsAudit && !landlock:
		t.Errorf("%s: the kernel's refusals were read, yet the direct connect to %s is not in %+v", where, direct, rec.Denied)
	case k != steps.KernelDenialsAudit && landlock:
		t.Errorf("%s: kernel_denials = %q, yet a Landlock refusal is listed", where, k)
	}
	w, err := sandbox.WatchDenials()
	if err != nil && rec.KernelDenials != err.Error() {
		t.Errorf("%s: kernel_denials = %q; the watch here says %q", where, rec.KernelDenials, err)
	}
	w.Close()
}
