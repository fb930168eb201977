package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
)

// ParseAnswer reads `approve ID ANSWER [--for run]` as acpflow and
// acpflow-temporal take it: allow or reject, and the one scope a grant
// has. Anything else is a usage error.
func ParseAnswer(answer, forWhat string) (d policies.Decision, forRun bool, err error) {
	d = policies.Decision(answer)
	if d != policies.Allow && d != policies.Reject {
		return "", false, UsageErrorf("answer %q: want allow or reject", answer)
	}
	if forWhat != "" && forWhat != "run" {
		return "", false, UsageErrorf("--for %q: the one scope is run (the rest of this run)", forWhat)
	}
	return d, forWhat == "run", nil
}

// PrintApprovals prints approvals as a table, the agent's words escaped
// and bounded; withStatus adds each one's status, for a list that holds
// answered ones too.
func PrintApprovals(w io.Writer, list []runs.Approval, withStatus bool) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no approvals pending")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	status := ""
	if withStatus {
		status = "STATUS\t"
	}
	fmt.Fprintf(tw, "ID\tRUN\tSTEP\t%sKIND\tCOMMAND\tRULE\tFALLBACK IN\n", status)
	for _, a := range list {
		kind, what := "", ""
		if a.Request != nil {
			kind, what = a.Request.Tool.Kind, a.Request.Tool.Command
			if what == "" {
				what = a.Request.Tool.Title
			}
		}
		if withStatus {
			status = a.Status + "\t"
		}
		left := time.Until(a.Deadline).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\t%s (%s)\n", a.ID, a.RunID, termtext.Line(a.StepID, 60), status,
			termtext.Line(kind, 40), termtext.Quote(what, 80), termtext.Line(a.Rule, 40), max(left, 0), a.Fallback)
	}
	tw.Flush()
}
