package runs

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// An answer given for the rest of a run is recorded in the store, so a
// process that takes the run up again (acpflow resume) answers a repeat
// with it, asking no one; a command with a secret in it (stored
// scrubbed) is asked again.
func TestAGrantRecordedInTheStoreAnswersTheRepeatAfterAResume(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(ctx, store.Run{ID: "r1"}); err != nil {
		t.Fatal(err)
	}
	req := &policies.PermissionRequest{Request: policies.Request{RunID: "r1", Step: "s"},
		Tool: policies.Tool{Kind: "execute", Command: "make deploy"}, Options: []policies.Option{{ID: "y", Kind: "allow_once"}}}
	now := time.Now()
	if err := s.CreateApproval(ctx, store.Approval{ID: "ap-1", RunID: "r1", Request: req, AnswerKey: "k", CreatedAt: now, Deadline: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AnswerApproval(ctx, "ap-1", store.Answer{Decision: "allow", ForRun: true, By: policies.ByCLI, At: now}); err != nil {
		t.Fatal(err)
	}
	h := &approvalHub{store: s, notice: func(string, ...any) {}, grants: map[grantKey]policies.Reply{}}
	r, err := h.Ask(ctx, &policies.Question{Request: req, Timeout: time.Second})
	if err != nil || !r.Grant || r.Decision != policies.Allow || r.Approval != "ap-1" || r.By != policies.ByCLI {
		t.Errorf("Ask = %+v, %v; want ap-1's grant", r, err)
	}
	scrubbed := *req
	scrubbed.Tool.Command = "make deploy TOKEN=[redacted]"
	secret := *req
	secret.Tool.Command = "make deploy TOKEN=s3cr3t"
	if _, ok := h.granted(ctx, &policies.Question{Request: &secret, Shown: &scrubbed}); ok {
		t.Error("a command with a secret in it was granted")
	}
}

// An answer from outside (the UI, a link, the CLI) is refused before the
// store when its id is too long to be one (and not quoted whole), or when
// it names no approver that answers so.
func TestAnApproveWithAnOverlongIDOrUnknownApproverIsRefused(t *testing.T) {
	ctx := context.Background()
	v, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	long := "ap-" + strings.Repeat("x", 10000)
	if _, err := v.Approve(ctx, long, policies.Allow, false, policies.ByUI); !errors.Is(err, store.ErrNotFound) || len(err.Error()) > 200 {
		t.Errorf("an overlong id: %v; want a short not-found error", err)
	}
	if _, err := v.GetApproval(ctx, long); !errors.Is(err, store.ErrNotFound) || len(err.Error()) > 200 {
		t.Errorf("an overlong id: %v; want a short not-found error", err)
	}
	if _, err := v.Approve(ctx, "ap-1", policies.Allow, false, "someone"); err == nil || !strings.Contains(err.Error(), "approver") {
		t.Errorf("an unknown approver: %v; want it refused", err)
	}
}

// A grant for the rest of the run answers a repeat of the same call
// only: for a call with no command, one naming the same files; an edit
// of another file is asked.
func TestAGrantForACallWithNoCommandCoversItsFilesOnly(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := &approvalHub{store: s, notice: func(string, ...any) {}, grants: map[grantKey]policies.Reply{}}
	edit := func(path string) *policies.PermissionRequest {
		return &policies.PermissionRequest{Request: policies.Request{RunID: "r1", Step: "s"},
			Tool: policies.Tool{Kind: "edit", Title: "Edit", Locations: []policies.ToolLocation{{Path: path}}}}
	}
	h.grant(edit("/w/README.md"), policies.Reply{Decision: policies.Allow, By: policies.ByCLI, Approval: "ap-1"})
	if _, ok := h.granted(ctx, &policies.Question{Request: edit("/w/README.md")}); !ok {
		t.Error("the same edit again was not granted")
	}
	if g, ok := h.granted(ctx, &policies.Question{Request: edit("/w/.env")}); ok {
		t.Errorf("an edit of another file was granted: %+v", g)
	}
}

// `acpflow approve` and the web UI confirm an answer in the same words,
// and `acpflow approvals --json` and GET /api/approvals print the same
// array, [] (never null) when nothing is pending.
func TestTheCLIAndTheUIWordAnAnswerAlike(t *testing.T) {
	once := Approval{Decision: "reject"}
	grant := Approval{Decision: "allow", ForRun: true}
	if got := AnswerText(once); got != "reject" {
		t.Errorf("an answer for this request: %q", got)
	}
	if got := AnswerText(grant); got != "allow for the rest of the run" {
		t.Errorf("a grant: %q", got)
	}
	if got := ApprovalsJSON(nil); got == nil || len(got) != 0 {
		t.Errorf("no approvals: %#v, want an empty array", got)
	}
	if got := ApprovalsJSON([]Approval{grant}); len(got) != 1 || got[0]["status"] != grant.Status {
		t.Errorf("one approval: %#v", got)
	}
}
