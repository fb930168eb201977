package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
)

// pendingApproval records a run and one pending approval of it.
func pendingApproval(t *testing.T, s *Store) Approval {
	t.Helper()
	ctx := context.Background()
	if err := s.CreateRun(ctx, Run{ID: "r1", Workflow: "w"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	a := Approval{ID: "ap-1", RunID: "r1", StepID: "s", Workflow: "w", Rule: "1", Reason: "a command", Fallback: "reject", AnswerKey: "k",
		Request:   &policies.PermissionRequest{Tool: policies.Tool{Kind: "execute", Command: "rm -rf build"}},
		CreatedAt: now, Deadline: now.Add(time.Minute)}
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// Of answers given at once, by as many writers as there are approvers
// (each its own store, as each is its own process), exactly one wins; the
// others are refused and every one of them is recorded as late.
func TestOfManyAnswersAtOnceExactlyOneWinsAndTheRestAreLate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pendingApproval(t, s)
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, late := 0, 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := Open(path)
			if err != nil {
				t.Error(err)
				return
			}
			defer w.Close()
			d := "allow"
			if i%2 == 1 {
				d = "reject"
			}
			_, err = w.AnswerApproval(context.Background(), "ap-1", Answer{Decision: d, By: policies.ByCLI, At: time.Now()})
			var le *LateError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.As(err, &le):
				late++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	a, err := s.GetApproval(context.Background(), "ap-1")
	if err != nil {
		t.Fatal(err)
	}
	if won != 1 || late != n-1 || a.Status != ApprovalAnswered || len(a.Late) != n-1 || a.AnsweredBy != policies.ByCLI {
		t.Errorf("%d won, %d late; approval %+v", won, late, a)
	}
	if list, _ := s.PendingApprovals(context.Background()); len(list) != 0 {
		t.Errorf("still pending: %v", list)
	}
}

// A run is read as waiting while an approval of it is pending, and as
// running again once it is closed; `runs --status waiting` finds it, and
// `--status running` still does.
func TestARunIsWaitingWhileAnApprovalOfItIsPending(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	pendingApproval(t, s)
	status := func() string {
		d, err := s.GetRun(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		return string(d.Run.Status)
	}
	if got := status(); got != "waiting" {
		t.Errorf("status %s while pending, want waiting", got)
	}
	for _, f := range []string{"waiting", "running"} {
		if list, err := s.ListRuns(ctx, Filter{Status: engine.Status(f)}); err != nil || len(list) != 1 {
			t.Errorf("--status %s: %v %v", f, list, err)
		}
	}
	a, err := s.CloseApproval(ctx, "ap-1", ApprovalWithdrawn)
	if err != nil || a.Status != ApprovalWithdrawn {
		t.Fatalf("close: %+v %v", a, err)
	}
	if got := status(); got != "running" {
		t.Errorf("status %s once closed, want running", got)
	}
	if _, err := s.AnswerApproval(ctx, "ap-1", Answer{Decision: "allow", By: policies.ByUI, At: time.Now()}); !errors.As(err, new(*LateError)) {
		t.Errorf("an answer after the close: %v, want it refused as late", err)
	}
}

// A replayed answer link is refused every time, and recorded only up to
// maxLate times: the row stops growing.
func TestReplayedLateAnswersAreBounded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	pendingApproval(t, s)
	if _, err := s.AnswerApproval(ctx, "ap-1", Answer{Decision: "allow", By: policies.ByCLI, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for range maxLate + 5 {
		if _, err := s.AnswerApproval(ctx, "ap-1", Answer{Decision: "reject", By: policies.ByWebhook, At: time.Now()}); !errors.As(err, new(*LateError)) {
			t.Fatalf("a replayed answer: %v, want it refused as late", err)
		}
	}
	a, err := s.GetApproval(ctx, "ap-1")
	if err != nil || len(a.Late) != maxLate || a.Decision != "allow" {
		t.Errorf("%d late answers kept, decision %s (%v); want %d, allow", len(a.Late), a.Decision, err, maxLate)
	}
}

// An approval left pending past its deadline (its process was killed) is
// not listed as waiting for an answer: no one would take it.
func TestAnApprovalPastItsDeadlineIsNotListedPending(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	pendingApproval(t, s)
	past := time.Now().Add(-time.Hour).UTC()
	if err := s.CreateApproval(ctx, Approval{ID: "ap-2", RunID: "r1", StepID: "s", AnswerKey: "k", Request: &policies.PermissionRequest{},
		CreatedAt: past, Deadline: past.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	list, err := s.PendingApprovals(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "ap-1" {
		t.Errorf("pending: %v %v; want ap-1 alone", list, err)
	}
}
