package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// What a hostile agent prints (as cmd/acpflow's terminal-safety tests):
// a clipboard write (OSC 52), a window title, a clear screen, cursor
// moves, a carriage return that overwrites a line, an 8-bit CSI, bells,
// DEL; and text that must survive (emoji, tab).
const (
	hostileOutput = "before\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x1b\\ \x1b[2J\x1b[H \x1b[5A safe\rEVIL \u009b2J ding\x07 del\x7f 🎉 tab\tend"
	hostileStderr = "stderr \x1b]52;c;aGk=\x07 \x1b[31mred\x1b[0m\roverwritten\n"
	hostileTitle  = "rm \x1b]0;t\x07 x"
	evilID        = "id\n  FAKE lf\r  FAKE cr\r\n  FAKE crlf\u2028FAKE ls\u2029FAKE ps\u0085FAKE nel\vFAKE vt\fFAKE ff\x1b[1A\x1b[2KFAKE csi\u202eFAKE bidi"
)

// terminalUnsafe says where s holds something a terminal would act on: ESC,
// BEL, CR, another C0 control but newline and tab, DEL, a C1 control, or
// invalid UTF-8.
func terminalUnsafe(s string) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return fmt.Sprintf("invalid UTF-8 at %d", i)
		case (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f):
			return fmt.Sprintf("%U at %d in %q", r, i, s[max(0, i-20):min(len(s), i+20)])
		}
	}
	return ""
}

func TestTheLiveViewShowsAgentTextNeutralised(t *testing.T) {
	var buf strings.Builder
	v := newLiveView(&buf)
	now := time.Now()
	for _, e := range []steps.Event{
		{RunID: "r", Time: now, Data: steps.RunStart{Steps: []string{"a", "b", "c", "d", "e"}}},
		{RunID: "r", Step: "a", Time: now, Data: steps.StepStart{Attempt: 1}},
		{RunID: "r", Step: "a", Time: now, Data: acpagent.MessageChunk{Text: "x\x1b]52;c;"}},
		{RunID: "r", Step: "a", Time: now, Data: acpagent.MessageChunk{Text: "aGk=\x07" + hostileOutput}},
		{RunID: "r", Step: "b", Time: now, Data: steps.Permission{PermissionRecord: policies.PermissionRecord{Kind: "execute", Title: hostileTitle, Decision: policies.Allow}}},
		{RunID: "r", Step: "c", Time: now, Data: steps.StepEnd{Status: "failed", Error: hostileStderr}},
		// A kind and title that break the line: the step keeps its one line.
		{RunID: "r", Step: "d", Time: now, Data: steps.Permission{PermissionRecord: policies.PermissionRecord{Kind: "execute" + evilID, Title: evilID, Decision: policies.Allow}}},
		{RunID: "r", Step: "e", Time: now, Data: steps.Unasked{PermissionRecord: policies.PermissionRecord{Kind: "edit" + evilID, Title: evilID, Would: policies.Reject}}},
	} {
		v.Emit(e)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		line := v.steps[id].describe(false)
		if where := terminalUnsafe(line); where != "" {
			t.Errorf("step %s's line: %s", id, where)
		}
		if strings.ContainsAny(line, "\n\u2028\u2029\u202e") {
			t.Errorf("step %s's line breaks or is reordered: %q", id, line)
		}
	}
	if got := v.steps["a"].describe(false); !strings.Contains(got, "🎉 tab\tend") {
		t.Errorf("step a's line lost the agent's text: %q", got)
	}
	v.Close(nil)
}
