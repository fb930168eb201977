package workflows

import (
	"net/url"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

var approvalsKeys = []string{"webhook", "secret", "answer-url"}

// decodeApprovals reads `approvals: {webhook: URL, secret: …, answer-url:
// URL}` (docs/policies.md#approvals), of a workflow or an outer policy
// file (from names which, for notices).
func (d *decoder) decodeApprovals(n *node, from string) *policies.Approvals {
	f := d.fields(n, "approvals", approvalsKeys)
	if f == nil {
		return nil
	}
	a := &policies.Approvals{From: from}
	v := f["webhook"]
	if v == nil {
		d.at(n.pos, "approvals: webhook: is missing (the URL each pending request is POSTed to)")
		return nil
	}
	a.Webhook = d.approvalsURL(v, "approvals.webhook")
	if v := f["answer-url"]; v != nil {
		a.AnswerURL = d.approvalsURL(v, "approvals.answer-url")
	}
	switch v := f["secret"]; {
	case v == nil:
		d.at(n.pos, "approvals: secret: is missing: it signs each request (X-Acpflow-Signature); write ${{ env.NAME }}")
	default:
		s, ok := d.str(v, "approvals.secret")
		if !ok {
			break
		}
		if name := policies.SecretFromEnv(s); name != "" {
			a.SecretEnv = name
		} else if strings.Contains(s, "${{") {
			d.at(d.find(v, "${{", 0), "approvals.secret: the one expression allowed here is ${{ env.NAME }}")
		} else if strings.TrimSpace(s) == "" {
			d.at(v.pos, "approvals.secret is empty")
		} else {
			a.Secret = s
		}
	}
	return a
}

// approvalsURL reads a URL of approvals:: https, or http to a loopback
// address (the body carries answer links, which must not cross a network
// in clear).
func (d *decoder) approvalsURL(v *node, what string) string {
	s, ok := d.literal(v, what)
	if !ok {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		d.at(v.pos, "%s: %q is not an http(s) URL with a host", what, s)
	case u.User != nil || u.Fragment != "":
		d.at(v.pos, "%s: %q: no user or fragment", what, s)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		d.at(v.pos, "%s: %q: plain http is allowed to a loopback address only (answer links would cross the network in clear); use https", what, s)
	}
	return s
}
