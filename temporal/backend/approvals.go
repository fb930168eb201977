package backend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/temporal/client"
	"github.com/acpflow/acpflow/temporal/flow"
)

func NewApprovalsCmd(conn *Conn) *cobra.Command {
	var runID string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the permission requests waiting for a person, across the runs running on Temporal",
		Long: `List the permission requests that a policy decided to ask about (then: ask)
and that wait for an answer, in every acpflow run running on Temporal: each
one's id, run, step, tool kind and command, the rule that asked, and when its
ask-timeout ends (then its ask-fallback decides). Each run's workflow keeps
its approvals, so one outlives the worker whose step asked. Answer one with
acpflow-temporal approve ID. With --run, every approval of that run, answered
or not, with its late answers.`,
		Example: `  acpflow-temporal approvals
  acpflow-temporal approvals --json
  acpflow-temporal approvals --run nightly --json`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := conn.Dial()
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			defer cl.Close()
			list, err := client.Approvals(cmd.Context(), cl, runID)
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			if runID == "" {
				list = pendingOnly(list)
			}
			if jsonOut {
				return printApprovalsJSON(cmd.OutOrStdout(), list)
			}
			printApprovals(cmd.OutOrStdout(), list)
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "list every approval of this run (its id), answered or not")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array instead of a table")
	return cmd
}

// pendingOnly are the approvals of list still waiting for an answer.
func pendingOnly(list []flow.Approval) []flow.Approval {
	var out []flow.Approval
	for _, a := range list {
		if a.Status == runs.ApprovalPending {
			out = append(out, a)
		}
	}
	return out
}

// printApprovalsJSON prints approvals as acpflow approvals --json and
// show --json do, with the attempt (and for-each element) that asked.
func printApprovalsJSON(w io.Writer, list []flow.Approval) error {
	out := make([]map[string]any, len(list))
	for i, a := range list {
		out[i] = runs.ApprovalJSON(a.Approval)
		out[i]["attempt"] = a.Attempt
		if a.Index != nil {
			out[i]["index"] = *a.Index
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// printApprovals prints approvals as a table, as acpflow approvals does,
// the agent's words escaped and bounded.
func printApprovals(w io.Writer, list []flow.Approval) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no approvals pending")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRUN\tSTEP\tSTATUS\tKIND\tCOMMAND\tRULE\tFALLBACK IN")
	for _, a := range list {
		kind, what := "", ""
		if a.Request != nil {
			kind, what = a.Request.Tool.Kind, a.Request.Tool.Command
			if what == "" {
				what = a.Request.Tool.Title
			}
		}
		left := time.Until(a.Deadline).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s (%s)\n", a.ID, a.RunID, termtext.Line(a.StepID, 60), a.Status, termtext.Line(kind, 40),
			termtext.Quote(what, 80), termtext.Line(a.Rule, 40), max(left, 0), a.Fallback)
	}
	tw.Flush()
}

func NewApproveCmd(conn *Conn) *cobra.Command {
	var forWhat string
	cmd := &cobra.Command{
		Use:   "approve ID allow|reject",
		Short: "Answer a permission request waiting for a person, in a run on Temporal",
		Long: `Answer a pending permission request (acpflow-temporal approvals lists them):
allow selects the agent's allow-once option, reject its reject option. The
answer is a signal to the run's workflow, which keeps it even while no worker
runs the step: the step, run again by a worker, takes it. With --for run, the
same answer is given, without asking, to every later request of the run with
the same tool kind and command (recorded as a grant).

The first answer wins; a later one is refused (exit 1) and recorded as late.`,
		Example: `  acpflow-temporal approve ap-3f9a0c1d2e4b allow
  acpflow-temporal approve ap-3f9a0c1d2e4b reject
  acpflow-temporal approve ap-3f9a0c1d2e4b allow --for run`,
		Args: cli.Args("acpflow-temporal approvals lists the pending ones", "ID", "ANSWER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := policies.Decision(args[1])
			if d != policies.Allow && d != policies.Reject {
				return cli.UsageErrorf("answer %q: want allow or reject", args[1])
			}
			if forWhat != "" && forWhat != "run" {
				return cli.UsageErrorf("--for %q: the one scope is run (the rest of this run)", forWhat)
			}
			cl, err := conn.Dial()
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			defer cl.Close()
			a, err := client.Approve(cmd.Context(), cl, args[0], d, forWhat == "run", policies.ByCLI)
			switch {
			case errors.Is(err, runs.ErrNotFound):
				return cli.UsageError(err)
			case err != nil:
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			scope := ""
			if a.ForRun {
				scope = " for the rest of the run"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "approval %s: %s%s (run %s, step %s)\n", a.ID, a.Decision, scope, a.RunID, a.StepID)
			return nil
		},
	}
	cmd.Flags().StringVar(&forWhat, "for", "", "run: give the same answer to the run's later requests of the same tool kind and command")
	return cmd
}
