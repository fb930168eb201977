package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/runs"
)

// worktreeText says what became of a worktree, on one line (show).
func worktreeText(wt *engine.Worktree) string {
	var b strings.Builder
	if wt.Step != "" {
		fmt.Fprintf(&b, "step %s", wt.Step)
		if wt.Index != nil {
			fmt.Fprintf(&b, " item %d", *wt.Index)
		}
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "branch %s from %s", wt.Branch, wt.Base)
	switch {
	case wt.Kept == "":
		fmt.Fprintf(&b, ", at %s (the run has not ended)", wt.Path)
		return b.String()
	case wt.Commit != "":
		fmt.Fprintf(&b, ", commit %s, %d file(s) changed", shortCommit(wt.Commit), wt.FilesChanged)
	default:
		b.WriteString(", nothing changed")
	}
	switch wt.Kept {
	case engine.KeptWorktree:
		fmt.Fprintf(&b, "; worktree %s", wt.Path)
	case engine.KeptBranch:
		b.WriteString("; worktree removed, branch kept")
	case engine.KeptNothing:
		b.WriteString("; worktree and branch removed")
	}
	return b.String()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

func newWorktreesCmd() *cobra.Command {
	var statePath string
	var prune, force, jsonOut bool
	cmd := &cobra.Command{
		Use:   "worktrees",
		Short: "List (or prune) the git worktrees acpflow made for isolation: worktree",
		Long: `List the git worktrees that runs with isolation: worktree made and that are
still there: each one's run, branch, files changed against its base, age and
the status of its run. acpflow makes them in a directory beside the run
store (worktrees/ next to state.db), never inside your repository.

With --prune, remove the worktrees of runs that are over (ended, or whose
acpflow died) whose changes are committed on their branch: the branch
stays, with its commits (a branch with no commit of its own goes too).
A worktree that holds uncommitted changes (a tracked file changed, or a
file .gitignore does not ignore) or that is not on its branch is kept and
named, with why, unless --force, which removes it and discards them. The
worktree of a run still going is never removed. Prune also forgets
worktrees whose directory vanished, clears what a crash left half-made
(git's locks included), and runs git worktree prune in each repository.`,
		Example: `  # the worktrees of every run, with their branches and changes
  acpflow worktrees

  # remove those of finished runs; their branches keep the commits
  acpflow worktrees --prune

  # ... and those holding uncommitted changes too, discarding them
  acpflow worktrees --prune --force

  # as JSON, one object per worktree
  acpflow worktrees --json`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if force && !prune {
				return cli.UsageErrorf("--force goes with --prune: acpflow worktrees --prune --force")
			}
			svc, err := openStore(statePath)
			if err != nil {
				return cli.UsageError(err)
			}
			defer svc.Close()
			ctx := cmd.Context()
			var done runs.Pruned
			if prune {
				// What prune did is printed even when part of it failed.
				done, err = svc.PruneWorktrees(ctx, force)
			}
			list, lerr := svc.Worktrees(ctx)
			if lerr != nil {
				return errors.Join(err, lerr)
			}
			w := cmd.OutOrStdout()
			if jsonOut {
				if jerr := writeWorktreesJSON(w, list, done, prune); jerr != nil {
					return jerr
				}
				return err
			}
			printPruned(w, done)
			printWorktrees(w, list)
			return err
		},
	}
	addStateFlag(cmd, &statePath)
	cmd.Flags().BoolVar(&prune, "prune", false, "remove the worktrees of finished runs whose changes are committed (their branches stay), and what a crash left")
	cmd.Flags().BoolVar(&force, "force", false, "with --prune: remove worktrees holding uncommitted changes too, discarding them")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON instead of a table")
	return cmd
}

// printPruned says what prune removed and what it kept, each with why.
func printPruned(w io.Writer, done runs.Pruned) {
	for _, p := range done.Removed {
		fmt.Fprintf(w, "removed %s (run %s, %s)\n", termtext.Line(p.Branch, 200), p.RunID, termtext.Line(p.Why, 400))
	}
	for _, k := range done.Kept {
		fmt.Fprintf(w, "kept %s at %s (run %s): %s\n", termtext.Line(k.Branch, 200), termtext.Line(k.Path, 400), k.RunID, termtext.Line(k.Why, 600))
	}
}

// printWorktrees prints the worktrees as a table.
func printWorktrees(w io.Writer, list []runs.WorktreeInfo) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no worktrees")
		return
	}
	tw := newTable(w, "RUN\tBRANCH\tFILES\tAGE\tRUN STATUS\tPATH")
	for _, l := range list {
		files := fmt.Sprint(len(l.Changed))
		if !l.Exists {
			files = "-"
		}
		path := l.Path
		if !l.Exists {
			path += " (gone)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.RunID, termtext.Line(l.Branch, 200), files,
			ageText(time.Since(l.Created)), l.RunStatus, termtext.Line(path, 400))
	}
	tw.Flush()
}

func writeWorktreesJSON(w io.Writer, list []runs.WorktreeInfo, done runs.Pruned, prune bool) error {
	out := map[string]any{"worktrees": nonNil(list)}
	if prune {
		out["pruned"] = nonNil(done.Removed)
		out["kept"] = nonNil(done.Kept)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func nonNil(l []runs.WorktreeInfo) []runs.WorktreeInfo {
	if l == nil {
		return []runs.WorktreeInfo{}
	}
	return l
}

// ageText is how long ago, in the largest unit that fits.
func ageText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
