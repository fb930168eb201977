package acpsubagent

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/redact"
)

// TestAPermissionRequestPastABoundIsRefusedWithoutAskingThePolicy: a
// request too large to show a policy is answered with the agent's reject
// option, recorded with rule request-too-large and a reason that names the
// field, and its record keeps a bounded part of what it said; one within
// the bounds is the policy's to decide.
//
// Class of input: each field a policy reads, just past its bound and far
// past it (the whole request, through the raw input), against the same
// fields just within.
func TestAPermissionRequestPastABoundIsRefusedWithoutAskingThePolicy(t *testing.T) {
	for _, tc := range []struct {
		size string
		past string // what the reason names; "" for a request within the bounds
	}{
		{"title=131073", "its title is 131073 bytes, more than the 128 KiB a policy is shown"},
		{"title=4000000", "its title is 4000000 bytes"},
		{"command=131073", "its command is"},
		{"raw_input=1100000", "its request is"},
		{"raw_input=9000000", "its request is"},
		{"path=4200", "its locations[0].path is"},
		{"locations=1025", "it names 1025 locations"},
		{"options=70", "it offers 74 options"},
		{"title=131000", ""},
		{"command=131000", ""},
		{"raw_input=1000000", ""},
		{"locations=1000", ""},
	} {
		t.Run(tc.size, func(t *testing.T) {
			h := newHarness(t, "-permission-size", tc.size, "-no-chunks")
			h.perm = policies.Shorthand{Decision: policies.Allow}
			res := h.run(context.Background())
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(res.Permissions) != 1 {
				t.Fatalf("%d records, want 1", len(res.Permissions))
			}
			rec := res.Permissions[0]
			if tc.past == "" {
				if res.Output != "permission size "+tc.size+": opt-allow-once\n" || rec.Rule != "shorthand" {
					t.Errorf("output %q, rule %q: want the policy's allow", res.Output, rec.Rule)
				}
				return
			}
			if res.Output != "permission size "+tc.size+": opt-reject-once\n" {
				t.Errorf("output %q, want the request refused with the reject option", res.Output)
			}
			if rec.Rule != policies.RuleRequestTooLarge || rec.Decision != policies.Reject || rec.OptionID != "opt-reject-once" ||
				!strings.Contains(rec.Reason, tc.past) || !strings.Contains(rec.Reason, "refused without asking the policy") {
				t.Errorf("record %+v, want rule %s, reject, a reason saying %q", short(rec), policies.RuleRequestTooLarge, tc.past)
			}
			if n := len(rec.Title) + len(rec.Command); n > 2*(maxRecordText+64) || len(rec.Locations) > maxRecordLocations {
				t.Errorf("the record keeps %d bytes of title and command and %d locations", n, len(rec.Locations))
			}
		})
	}
}

// short is a record with its long texts cut, for a failure's message.
func short(r policies.PermissionRecord) policies.PermissionRecord {
	r.Title, r.Command, r.Locations = recordText(r.Title), recordText(r.Command), recordLocations(r.Locations)
	return r
}

// blockingPolicy allows every request once released, and counts how many
// of its calls were in flight at once.
type blockingPolicy struct {
	release chan struct{}

	mu           sync.Mutex
	inside, most int
}

func (p *blockingPolicy) DecidePermission(ctx context.Context, _ *policies.PermissionRequest) (policies.Verdict, error) {
	p.mu.Lock()
	p.inside++
	p.most = max(p.most, p.inside)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inside--
		p.mu.Unlock()
	}()
	select {
	case <-p.release:
		return policies.Verdict{Decision: policies.Allow, Rule: "1"}, nil
	case <-ctx.Done():
		return policies.Verdict{}, ctx.Err()
	}
}

// TestAFloodOfPermissionRequestsIsRefusedPastTheCap: an agent that sends
// many requests at once while the policy is deciding has the ones past
// maxWaitingPermissions refused at once, each recorded; the policy is
// never asked about more than that many at a time, and the turn ends when
// the policy answers the ones it holds.
//
// Class of input: floods of just past the cap, several times it, and far
// past the gate's bound on requests held (maxHeldRequests).
func TestAFloodOfPermissionRequestsIsRefusedPastTheCap(t *testing.T) {
	for _, n := range []int{maxWaitingPermissions + 1, 100, 1000} {
		t.Run(fmt.Sprint(n, " requests"), func(t *testing.T) {
			h := newHarness(t, "-permission-flood", fmt.Sprint(n), "-no-chunks")
			pol := &blockingPolicy{release: make(chan struct{})}
			h.perm = pol
			refused := n - maxWaitingPermissions
			released := make(chan bool, 1)
			go func() {
				// The policy holds its answers until every refusal has
				// reached the agent (a minute is a hang guard).
				deadline := time.Now().Add(time.Minute)
				for len(h.recorded("permission_answer")) < refused && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				released <- len(h.recorded("permission_answer")) >= refused
				close(pol.release)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res := h.run(ctx)
			if !<-released {
				t.Fatalf("the agent had %d answers while the policy held the rest, want %d refused at once", len(h.recorded("permission_answer")), refused)
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			want := fmt.Sprintf("flood: opt-allow-once %d, opt-reject-once %d\n", maxWaitingPermissions, refused)
			if res.Output != want {
				t.Errorf("output %q, want %q", res.Output, want)
			}
			if pol.most > maxWaitingPermissions {
				t.Errorf("the policy was asked %d requests at once, want at most %d", pol.most, maxWaitingPermissions)
			}
			byRule := map[string]int{}
			for _, r := range res.Permissions {
				byRule[r.Rule]++
				if r.Rule == policies.RuleTooManyRequests && (r.Decision != policies.Reject || !strings.Contains(r.Reason, "16 permission requests of the turn were already waiting")) {
					t.Errorf("record %+v", r)
				}
			}
			if byRule[policies.RuleTooManyRequests] != refused || byRule["1"] != maxWaitingPermissions || len(res.Permissions) != n {
				t.Errorf("records by rule %v, want %d too-many-requests and %d of the policy", byRule, refused, maxWaitingPermissions)
			}
		})
	}
}

// TestALineThatIsNotJSONMidTurnFailsTheStepAtOnce: a line on the agent's
// stdout that is not JSON during a turn fails the step at once (not at its
// timeout), with an error that quotes the line's beginning, escaped and
// scrubbed of secrets; the agent is gone after.
//
// Class of input: text, JSON values that are not objects, a broken
// object, escape sequences, a line of a MiB, and a line holding a secret
// the agent was given.
func TestALineThatIsNotJSONMidTurnFailsTheStepAtOnce(t *testing.T) {
	const secret = "sk-abcdef-0123456789"
	long := "Traceback " + strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		name, line string
		quoted     string // what the error shows of the line
	}{
		// (The long line is written by -stdout-long: an argument cannot be a MiB.)
		{"text", "Traceback (most recent call last):", `"Traceback (most recent call last):"`},
		{"a JSON array", `[1,2,3]`, `"[1,2,3]"`},
		{"a JSON number", `42`, `"42"`},
		{"a JSON string", `"hello"`, `"\"hello\""`},
		{"a broken object", `{"jsonrpc":"2.0","method":`, `"{\"jsonrpc\":\"2.0\",\"method\":"`},
		{"escape sequences", "\x1b[31mred\x1b[0m \x07", `"\x1b[31mred\x1b[0m \a"`},
		{"a line of a MiB", long, `"Traceback xxxxxxxxxx`},
		{"a secret", "token=" + secret + " in the log", `"token=[redacted] in the log"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := []string{"-stdout-line", tc.line, "-prompt-hang"}
			if tc.line == long {
				flags = []string{"-stdout-long", fmt.Sprint(1 << 20), "-prompt-hang"}
			}
			h := newHarness(t, flags...)
			h.ambient["ACME_API_KEY"] = secret
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			began := time.Now()
			res := h.run(ctx)
			took := h.settled.Sub(began)
			if res.StopReason != steps.Error || res.Err == nil {
				t.Fatalf("stop %s, err %v; want the step failed", res.StopReason, res.Err)
			}
			msg := res.Err.Error()
			if !strings.Contains(msg, "agent test wrote a line that is not JSON on stdout during its turn: "+tc.quoted) {
				t.Errorf("error %q\nwant it to quote %s", msg, tc.quoted)
			}
			if took > 5*time.Second {
				t.Errorf("the step took %s to fail: the line was not what ended it", took)
			}
			if strings.Contains(msg, secret) || strings.Contains(msg, "\x1b") {
				t.Errorf("the error shows the secret or an escape: %q", msg)
			}
			if tc.line == long && (len(msg) > 2000 || !strings.Contains(msg, fmt.Sprintf("(cut from %d bytes)", len(long)))) {
				t.Errorf("the error is %d bytes: %.300q", len(msg), msg)
			}
		})
	}
}

// TestLinesThatAreNotJSONOutsideATurnAreTolerated: what an agent prints
// before it speaks ACP (a banner), and blank lines at any time, are not a
// reason to fail: the step completes, and the banner is counted.
func TestLinesThatAreNotJSONOutsideATurnAreTolerated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		noise int64
	}{
		{"a banner at startup", []string{"-banner", "Welcome to agent v1.2", "-banner", "[1, 2]"}, 2},
		{"blank lines mid-turn", []string{"-stdout-line", "", "-stdout-line", " \t "}, 0},
		{"a banner and a blank line mid-turn", []string{"-banner", "loading…", "-stdout-line", "\r"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.flags...)
			res := h.run(context.Background())
			if res.Err != nil || res.Output != "Hello, world" {
				t.Fatalf("result %q %v", res.Output, res.Err)
			}
			if td := teardownOf(t, h); td.NonProtocolLines != tc.noise {
				t.Errorf("teardown counts %d lines that were not JSON-RPC, want %d", td.NonProtocolLines, tc.noise)
			}
		})
	}
}

// TestTheGateHoldsAnAgentWhoseRequestsGoUnanswered: the SDK serves each
// request the gate passes on a goroutine of its own until its answer is
// written, so the gate stops reading once maxHeldRequests are unanswered
// (the agent then blocks on its own write), reads one more for each
// answer written, and reads on freely once closed (teardown).
//
// Class of input: requests of every kind (permission requests and
// others) well past the bound, answers written one at a time.
func TestTheGateHoldsAnAgentWhoseRequestsGoUnanswered(t *testing.T) {
	var lines strings.Builder
	const n = 3 * maxHeldRequests
	for i := range n {
		method := "session/request_permission"
		if i%2 == 1 {
			method = "fs/read_text_file"
		}
		fmt.Fprintf(&lines, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`+"\n", i, method)
	}
	g := newStdoutGate(strings.NewReader(lines.String()))
	var mu sync.Mutex
	passed := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(g)
		for {
			if _, err := r.ReadBytes('\n'); err != nil {
				return
			}
			mu.Lock()
			passed++
			mu.Unlock()
		}
	}()
	// settledAt waits until want lines have passed and no more pass for a
	// moment.
	settledAt := func(want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			mu.Lock()
			got := passed
			mu.Unlock()
			if got == want {
				time.Sleep(100 * time.Millisecond)
				mu.Lock()
				got = passed
				mu.Unlock()
				if got == want {
					return
				}
			}
			if got > want || time.Now().After(deadline) {
				t.Fatalf("%d requests passed, want %d", got, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	settledAt(maxHeldRequests)
	for i := 1; i <= 3; i++ {
		g.answerWritten()
		settledAt(maxHeldRequests + i)
	}
	g.close()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the gate held its reader after it was closed")
	}
	if passed != n {
		t.Errorf("%d requests passed after the gate closed, want all %d", passed, n)
	}
}

// TestARecordCutThroughASecretKeepsNoneOfIt: a record acpflow makes
// itself keeps 1 KiB of a text, cut before any scribe sees it; a secret the
// cut went through is not shown in part.
//
// Class of input: the secret begun a few bytes, one byte and all but one
// byte before the cut, and whole just before it, in the title, the
// command and a path.
func TestARecordCutThroughASecretKeepsNoneOfIt(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	s := newScribe("a", []string{secret})
	for _, before := range []int{4, 1, len(secret) - 1, len(secret), len(secret) + 3} {
		text := strings.Repeat("x", maxRecordText-before) + secret + strings.Repeat("y", 5000)
		req := &policies.PermissionRequest{Tool: policies.Tool{ID: "c", Title: text, Command: text,
			Locations: []policies.ToolLocation{{Path: "/" + text[1:]}}}}
		rec := s.Permission(answeredItself(req, policies.SourceWorkflow, policies.RuleOtherSession, "r"))
		for _, got := range []string{rec.Title, rec.Command, rec.Locations[0].Path} {
			kept, _, _ := strings.Cut(got, redact.CutMark)
			if strings.Contains(kept, secret) || before < len(secret) && strings.HasSuffix(kept, secret[:before]) {
				t.Errorf("secret begun %d bytes before the cut: kept %q", before, kept[len(kept)-40:])
			}
			if !strings.Contains(got, redact.CutMark) || len(got) > maxRecordText+64 {
				t.Errorf("secret begun %d bytes before the cut: %d bytes kept, %q", before, len(got), got[len(got)-40:])
			}
		}
	}
}
