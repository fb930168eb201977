package ui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/acpflow/acpflow/runs/whatif"
	"github.com/acpflow/acpflow/workflows"
)

// whatIfRunsMax bounds the runs one what-if page decides again when the
// selection names no limit: the page answers in one request.
const whatIfRunsMax = 200

// whatIfRow is one changed request or spawn on the what-if page.
type whatIfRow struct {
	RunID, Step, What, Old, New string
}

// whatIfPage is `acpflow policy test POLICY --runs SELECTION` as a page:
// the form picks the runs (the same selections: all, workflow=…,
// status=…, batch=…, limit=N, or a run or batch id) and takes the policy
// as text; the answer is a table of what would change.
//
// # Notes
//
// The page opens no file a request names: a policy path here would let
// anyone who reaches the page read the server user's files through its
// errors. The text is parsed as sent (workflows.ParsePolicyText), so an
// error quotes only what the requester wrote.
func (s *Server) whatIfPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := map[string]any{"Title": "policy what-if", "Runs": q.Get("runs"), "Policy": q.Get("policy"), "Max": workflows.MaxPolicyText >> 10}
	if v["Runs"] == "" {
		v["Runs"] = "limit=20"
	}
	if strings.TrimSpace(q.Get("policy")) == "" {
		s.render(w, "whatif.html", v)
		return
	}
	rows, tot, note, err := s.whatIf(r, q.Get("policy"), v["Runs"].(string))
	if err != nil {
		v["Error"] = err.Error()
		w.WriteHeader(http.StatusBadRequest)
	} else {
		v["Rows"], v["Totals"], v["Note"], v["Done"] = rows, tot, note, true
	}
	s.render(w, "whatif.html", v)
}

func (s *Server) whatIf(r *http.Request, policyText, selection string) ([]whatIfRow, whatif.Totals, string, error) {
	ctx := r.Context()
	pol, err := whatif.ParsePolicies("policy", []byte(policyText))
	if err != nil {
		if looksLikePath(policyText) {
			err = fmt.Errorf("%w\nThe page takes a policy's text, not a file's path: paste the file's content", err)
		}
		return nil, whatif.Totals{}, "", err
	}
	pol.Outer = s.cfg.Outer
	sel, err := whatif.ParseSelection(selection)
	if err != nil {
		return nil, whatif.Totals{}, "", fmt.Errorf("runs: %v", err)
	}
	note := ""
	if sel.ID == "" && (sel.Filter.Limit == 0 || sel.Filter.Limit > whatIfRunsMax) {
		sel.Filter.Limit = whatIfRunsMax
		note = fmt.Sprintf("Only the newest %d runs of the selection were decided again; acpflow policy test decides any number.", whatIfRunsMax)
	}
	list, err := sel.Runs(ctx, s.cfg.Store)
	if err != nil {
		return nil, whatif.Totals{}, "", fmt.Errorf("runs %s: %v", selection, err)
	}
	t := whatif.New(pol)
	var rows []whatIfRow
	report := whatif.Report{
		Request: func(res *whatif.Result) error {
			if res.Changed {
				what := fmt.Sprintf("%s %q", res.Kind, res.Title)
				if res.Command != "" && res.Command != res.Title {
					what += " `" + res.Command + "`"
				}
				rows = append(rows, whatIfRow{RunID: res.RunID, Step: whatif.StepLabel(res.Step, res.Index, res.Attempt), What: what,
					Old: whatif.AnswerLabel(res.Old), New: whatif.AnswerLabel(res.New)})
			}
			return nil
		},
		Spawn: func(res *whatif.SpawnResult) error {
			if res.Changed {
				what := "spawn of " + res.Agent
				for _, n := range res.Added {
					what += " +" + n
				}
				for _, n := range res.Removed {
					what += " -" + n
				}
				rows = append(rows, whatIfRow{RunID: res.RunID, Step: whatif.StepLabel(res.Step, res.Index, res.Attempt), What: what,
					Old: whatif.EnvAnswerLabel(res.Old), New: whatif.EnvAnswerLabel(res.New)})
			}
			return nil
		},
	}
	for _, run := range list {
		loaded, err := whatif.LoadRun(ctx, s.cfg.Store, run)
		if err != nil {
			return nil, whatif.Totals{}, "", err
		}
		if err := t.Test(ctx, loaded, report); err != nil {
			return nil, whatif.Totals{}, "", err
		}
	}
	return rows, t.Totals(), note, nil
}

// looksLikePath says text is one line that reads as a file's path, as the
// page took before it took text: its error then says what it takes now.
func looksLikePath(text string) bool {
	text = strings.TrimSpace(text)
	if strings.Contains(text, "\n") || strings.Contains(text, ": ") {
		return false
	}
	for _, start := range []string{"/", "~", ".", "file:"} {
		if strings.HasPrefix(text, start) {
			return true
		}
	}
	return strings.HasSuffix(text, ".yaml") || strings.HasSuffix(text, ".yml")
}
