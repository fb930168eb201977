package store

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/acpflow/acpflow/engine"
)

func TestARunsWorktreesAreKeptAndListed(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	// Before the run is recorded, nothing is written and nothing fails.
	if err := s.SetRunWorktrees(ctx, "r1", []*engine.Worktree{{Path: "/w/r1"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := s.CreateRun(ctx, Run{ID: id, Workflow: "w", Workspace: "/repo", StartedAt: at(0)}); err != nil {
			t.Fatal(err)
		}
	}
	two := 2
	wts := []*engine.Worktree{
		{Path: "/w/r1", Branch: "acpflow/r1", Base: "HEAD", BaseCommit: "abc", Commit: "def", FilesChanged: 1, Files: []string{"a.txt"}, Kept: engine.KeptWorktree},
		{Path: "/w/r1-fix-2", Branch: "acpflow/r1-fix-2", Base: "main", Step: "fix", Index: &two},
	}
	if err := s.SetRunWorktrees(ctx, "r1", wts); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRunWorktrees(ctx, "r1")
	if err != nil || !reflect.DeepEqual(got, wts) {
		t.Fatalf("got %+v, %v; want %+v", got, err, wts)
	}
	if d, err := s.GetRun(ctx, "r1"); err != nil || !reflect.DeepEqual(d.Worktrees, wts) {
		t.Errorf("GetRun's worktrees %+v, %v", d.Worktrees, err)
	}
	if got, err := s.GetRunWorktrees(ctx, "r2"); err != nil || got != nil {
		t.Errorf("a run without worktrees: %+v, %v", got, err)
	}
	if _, err := s.GetRunWorktrees(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown run: %v", err)
	}
	list, err := s.ListWorktrees(ctx)
	if err != nil || len(list) != 1 || list[0].RunID != "r1" || list[0].Workspace != "/repo" || len(list[0].Worktrees) != 2 || list[0].Status != engine.StatusRunning {
		t.Errorf("ListWorktrees: %+v, %v", list, err)
	}
}
