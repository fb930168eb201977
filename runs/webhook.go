package runs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/store"
)

// webhook is one approvals: webhook of a run, its secret resolved.
type webhook struct {
	url       string
	secret    []byte
	answerURL string
	from      string // where approvals: was set, for notices
}

// webhooks are the run's approvals: webhooks: the outer policy's files',
// then the workflow's. One whose secret is a variable that is not set is
// left out, and a notice says so: an unsigned request would be one any
// sender could forge.
func (r *Runner) webhooks(wf *engine.Workflow) []webhook {
	var cfgs []*policies.Approvals
	for _, l := range r.Outer {
		if l.Approvals != nil {
			cfgs = append(cfgs, l.Approvals)
		}
	}
	if wf.Approvals != nil {
		cfgs = append(cfgs, wf.Approvals)
	}
	var out []webhook
	for _, c := range cfgs {
		secret := c.Secret
		if c.SecretEnv != "" {
			secret = r.Ambient[c.SecretEnv]
		}
		if secret == "" {
			if _, told := r.untoldSecrets.LoadOrStore(c.From, true); !told { // once a command, not once a run
				r.notice("approvals: in %s: the webhook's secret ($%s) is not set: its requests are not sent", c.From, c.SecretEnv)
			}
			continue
		}
		base := c.AnswerURL
		if base == "" {
			base = policies.DefaultAnswerURL
		}
		out = append(out, webhook{url: c.Webhook, secret: []byte(secret), answerURL: strings.TrimRight(base, "/"), from: c.From})
	}
	return out
}

// Bounds of a webhook's delivery: each attempt's time limit, how many
// attempts in all, and the backoff between them (doubling from the first
// to the last): a relay down for a minute still gets the request.
const (
	webhookAttemptTimeout = 10 * time.Second
	webhookAttempts       = 6
	webhookFirstBackoff   = 500 * time.Millisecond
	webhookMaxBackoff     = 30 * time.Second
)

// webhookClient posts to webhooks: no redirect is followed (a body signed
// for one URL goes to that URL only).
var webhookClient = &http.Client{
	Timeout:       webhookAttemptTimeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// deliver POSTs a's request to wh, signed, until it is taken (2xx), it is
// refused for good (a 3xx, a 4xx but 408 and 429), the attempts run out, or ctx
// ends (the approval was answered, or the step stopped waiting).
func (h *approvalHub) deliver(ctx context.Context, wh webhook, a store.Approval) {
	body, err := json.Marshal(WebhookBody(a, wh.answerURL))
	if err != nil {
		h.notice("approval %s: webhook body: %v", a.ID, err)
		return
	}
	backoff := webhookFirstBackoff
	for attempt := 1; ; attempt++ {
		retry, err := post(ctx, wh, body)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !retry || attempt == webhookAttempts {
			h.notice("approval %s: webhook %s (set in %s): not delivered after %d attempt(s): %v", a.ID, hostOf(wh.url), wh.from, attempt, err)
			return
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, webhookMaxBackoff)
	}
}

// post makes one attempt, and says whether a failed one is worth another.
func post(ctx context.Context, wh webhook, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "acpflow")
	req.Header.Set(policies.SignatureHeader, policies.Sign(wh.secret, body))
	resp, err := webhookClient.Do(req)
	if err != nil {
		return true, errorWithoutURL(err)
	}
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c >= 300 && c < 400: // not followed (webhookClient), and no retry makes it go away
		return false, fmt.Errorf("answered %s, a redirect, which is not followed: set approvals.webhook to the URL it redirects to", resp.Status)
	case c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests:
		return false, fmt.Errorf("answered %s", resp.Status)
	default:
		return true, fmt.Errorf("answered %s", resp.Status)
	}
}

// errorWithoutURL is a delivery's error without the URL, which may hold a
// token (a chat's incoming-webhook URL is its credential).
func errorWithoutURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// hostOf is a URL as notices name it: its scheme and host, never its path
// or query (see errorWithoutURL).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Scheme + "://" + u.Host
}

// WebhookBody is the JSON a webhook is POSTed for a pending approval
// (docs/policies.md#the-webhook): the request as the policy saw it
// (scrubbed as results are), the rule that asked, when the fallback
// decides, the answer links and a one-line text a chat relay can post.
func WebhookBody(a store.Approval, answerURL string) map[string]any {
	req := a.Request
	if req == nil {
		req = &policies.PermissionRequest{}
	}
	locs := req.Tool.Locations
	if locs == nil {
		locs = []policies.ToolLocation{}
	}
	links := map[string]string{
		"allow":         AnswerLink(answerURL, a, policies.Allow, false),
		"reject":        AnswerLink(answerURL, a, policies.Reject, false),
		"allow_for_run": AnswerLink(answerURL, a, policies.Allow, true),
	}
	what := req.Tool.Command
	if what == "" {
		what = req.Tool.Title
	}
	return map[string]any{
		"type": "approval", "approval_id": a.ID, "run_id": a.RunID, "workflow": a.Workflow, "step": a.StepID, "agent": req.Agent,
		"tool": map[string]any{"kind": req.Tool.Kind, "title": req.Tool.Title, "command": req.Tool.Command, "locations": locs},
		"rule": a.Rule, "reason": a.Reason, "fallback": a.Fallback,
		"created_at": a.CreatedAt.UTC().Format(time.RFC3339), "expires_at": a.Deadline.UTC().Format(time.RFC3339),
		"answer": links,
		"text": fmt.Sprintf("acpflow: run %s, step %s asks to %s %q (rule %s). Allow: %s  Reject: %s  (no answer by %s: %s)",
			a.RunID, a.StepID, req.Tool.Kind, cut(what, 200), a.Rule, links["allow"], links["reject"], a.Deadline.UTC().Format(time.RFC3339), a.Fallback),
	}
}

// cut bounds a text a chat message quotes.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// AnswerLink is the link that answers a with decision (for the rest of the
// run when forRun), served by `acpflow ui` at base: signed with the
// approval's own key, so it needs no UI token, and answers nothing else.
func AnswerLink(base string, a store.Approval, decision policies.Decision, forRun bool) string {
	q := url.Values{"decision": {string(decision)}, "sig": {answerSig(a.AnswerKey, a.ID, decision, forRun)}}
	if forRun {
		q.Set("for", "run")
	}
	return base + "/approvals/" + url.PathEscape(a.ID) + "/answer?" + q.Encode()
}

// AnswerLinkValid reports whether sig signs decision (and forRun) for a:
// the check of a link AnswerLink made.
func AnswerLinkValid(a store.Approval, decision policies.Decision, forRun bool, sig string) bool {
	return a.AnswerKey != "" && hmac.Equal([]byte(sig), []byte(answerSig(a.AnswerKey, a.ID, decision, forRun)))
}

// answerSig is HMAC-SHA256 under the approval's key of what a link
// answers.
func answerSig(key, id string, decision policies.Decision, forRun bool) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "%s\n%s\n%t", id, decision, forRun)
	return hex.EncodeToString(m.Sum(nil))
}
