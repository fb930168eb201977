package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
)

// approvalView is a pending approval as a page shows it: the request as
// the policy saw it (tool kind, command, files, the rule that said ask),
// its step and run, and when its ask-fallback decides.
type approvalView struct {
	runs.Approval
	Agent, Kind, Title, Command string
	Locations                   []string
	Left                        string // until the fallback decides
}

func approvalViews(list []runs.Approval) []approvalView {
	out := make([]approvalView, 0, len(list))
	for _, a := range list {
		if a.Status != runs.ApprovalPending {
			continue
		}
		v := approvalView{Approval: a, Left: time.Until(a.Deadline).Round(time.Second).String()}
		if r := a.Request; r != nil {
			v.Agent, v.Kind, v.Title, v.Command = r.Agent, r.Tool.Kind, r.Tool.Title, r.Tool.Command
			for _, l := range r.Tool.Locations {
				loc := l.Path
				if !l.InWorkspace {
					loc += " (outside the workspace)"
				}
				v.Locations = append(v.Locations, loc)
			}
		}
		out = append(out, v)
	}
	return out
}

// approvalsPage lists the approvals pending in every run of the store,
// each answerable (GET /approvals).
func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Store.PendingApprovals(r.Context())
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	s.render(w, "approvals.html", map[string]any{"Title": "approvals", "Approvals": approvalViews(list), "All": true})
}

// apiApprovals is the pending approvals as `acpflow approvals --json`
// prints them (GET /api/approvals).
func (s *Server) apiApprovals(w http.ResponseWriter, r *http.Request) {
	list, err := s.cfg.Store.PendingApprovals(r.Context())
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, runs.ApprovalsJSON(list))
}

// answerRequest is the body of POST /api/approvals/ID.
type answerRequest struct {
	Decision string `json:"decision"` // allow or reject
	For      string `json:"for"`      // "run": for the rest of the run; "": this request
}

// apiAnswer answers a pending approval from the UI's page (POST
// /api/approvals/ID, behind the token and a same-origin Origin): 200 with
// the approval answered, 409 when another answer came first (recorded as
// late).
func (s *Server) apiAnswer(w http.ResponseWriter, r *http.Request) {
	var req answerRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "want a JSON body {\"decision\": \"allow\"|\"reject\", \"for\": \"run\"|\"\"}"})
		return
	}
	s.answer(w, r, r.PathValue("id"), policies.Decision(req.Decision), req.For, policies.ByUI)
}

// answer records an answer (by ByUI or ByWebhook) and says what became
// of it, in JSON.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, id string, d policies.Decision, scope, by string) {
	if scope != "" && scope != "run" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("for=%q: the one scope is run", scope)})
		return
	}
	if d != policies.Allow && d != policies.Reject {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("decision=%q: want allow or reject", d)})
		return
	}
	a, err := runs.Approve(r.Context(), s.cfg.Store.Path(), id, d, scope == "run", by)
	var late *runs.LateError
	switch {
	case errors.As(err, &late):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "approval": runs.ApprovalJSON(late.Approval)})
	case err != nil:
		writeJSON(w, storeCode(err), map[string]any{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"approval": runs.ApprovalJSON(a),
			"message": fmt.Sprintf("%s: step %s of run %s goes on", runs.AnswerText(a), a.StepID, a.RunID)})
	}
}

// isAnswerLink says the path is a webhook's answer link
// (/approvals/ID/answer), which its signature authorises instead of the
// UI's token.
func isAnswerLink(path string) bool {
	rest, ok := strings.CutPrefix(path, "/approvals/")
	if !ok {
		return false
	}
	id, ok := strings.CutSuffix(rest, "/answer")
	return ok && id != "" && !strings.Contains(id, "/")
}

// answerLink serves a webhook's answer link (runs.AnswerLink): GET shows
// the request and a button (a chat's link preview fetches a link, and
// must not answer it); POST answers, as the webhook, when the signature
// is the approval's. A relay POSTs the link itself.
func (s *Server) answerLink(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	d, scope := policies.Decision(q.Get("decision")), q.Get("for")
	a, err := s.cfg.Store.GetApproval(r.Context(), id)
	if err != nil || (scope != "" && scope != "run") || !runs.AnswerLinkValid(a, d, scope == "run", q.Get("sig")) {
		// One answer for every failure: a link that is not one tells nothing.
		refuse(w, r, http.StatusForbidden, "this answer link is not valid (it may have been changed or cut)")
		return
	}
	if r.Method == http.MethodPost {
		s.answer(w, r, id, d, scope, policies.ByWebhook)
		return
	}
	s.render(w, "answer.html", map[string]any{"Title": "approval " + a.ID, "Approvals": approvalViews([]runs.Approval{a}),
		"Approval": a, "Decision": string(d), "ForRun": scope == "run", "Action": r.URL.RequestURI()})
}
