package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/runs/runcmd"
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
	var prune, jsonOut bool
	cmd := &cobra.Command{
		Use:   "worktrees",
		Short: "List (or prune) the git worktrees acpflow made for isolation: worktree",
		Long: `List the git worktrees that runs with isolation: worktree made and that are
still there: each one's run, branch, files changed against its base, age and
the status of its run. acpflow makes them in a directory beside the run
store (worktrees/ next to state.db), never inside your repository.

With --prune, remove the worktrees of runs that are over (ended, or whose
acpflow died) and that hold no change (their branches too), forget those
whose directory vanished, clear what a crash left half-made (git's locks
included), and run git worktree prune in each repository. Worktrees that
hold changes stay: review them, merge their branches, then remove them with
git worktree remove and git branch -D.`,
		Example: `  # the worktrees of every run, with their branches and changes
  acpflow worktrees

  # remove those whose runs are over and changed nothing
  acpflow worktrees --prune

  # as JSON, one object per worktree
  acpflow worktrees --json`,
		Args: runcmd.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := openStore(statePath)
			if err != nil {
				return runcmd.UsageError(err)
			}
			defer svc.Close()
			ctx := cmd.Context()
			var pruned []runs.WorktreeInfo
			if prune {
				if pruned, err = svc.PruneWorktrees(ctx); err != nil {
					return err
				}
			}
			list, err := svc.Worktrees(ctx)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeWorktreesJSON(cmd.OutOrStdout(), list, pruned, prune)
			}
			w := cmd.OutOrStdout()
			for _, p := range pruned {
				fmt.Fprintf(w, "removed %s (run %s, %s)\n", termtext.Line(p.Branch, 200), p.RunID, p.Why)
			}
			printWorktrees(w, list)
			return nil
		},
	}
	addStateFlag(cmd, &statePath)
	cmd.Flags().BoolVar(&prune, "prune", false, "remove the worktrees of finished runs that changed nothing, and what a crash left")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print JSON instead of a table")
	return cmd
}

// printWorktrees prints the worktrees as a table.
func printWorktrees(w io.Writer, list []runs.WorktreeInfo) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no worktrees")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tBRANCH\tFILES\tAGE\tRUN STATUS\tPATH")
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

func writeWorktreesJSON(w io.Writer, list, pruned []runs.WorktreeInfo, prune bool) error {
	out := map[string]any{"worktrees": nonNil(list)}
	if prune {
		out["pruned"] = nonNil(pruned)
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
