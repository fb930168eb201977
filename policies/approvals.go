package policies

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// Approvals is where the asks of a workflow (its top-level `approvals:`)
// or of an outer policy file travel besides the terminal, the web UI and
// `acpflow approve`: a webhook (docs/policies.md#approvals).
type Approvals struct {
	// Webhook is the URL each pending request is POSTed to, as JSON.
	Webhook string
	// Secret signs each body (SignatureHeader) and is the key of the
	// answer links; SecretEnv, when set, names the variable it is read
	// from at run time instead (`secret: ${{ env.NAME }}`).
	Secret    string
	SecretEnv string
	// AnswerURL is the base URL of the `acpflow ui` that serves the answer
	// links; "" means DefaultAnswerURL.
	AnswerURL string
	// From says where it was set, for notices: "the workflow" or the outer
	// policy file.
	From string
}

// DefaultAnswerURL is where answer links point when approvals: sets no
// answer-url: `acpflow ui`'s default address.
const DefaultAnswerURL = "http://127.0.0.1:8080"

// SignatureHeader carries a webhook body's signature:
// "sha256=" + hex(HMAC-SHA256(secret, body)), as GitHub signs its
// webhooks, so a relay checks it with code it already has.
const SignatureHeader = "X-Acpflow-Signature"

// Sign is the value of SignatureHeader for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// SignatureValid reports whether sig is Sign(secret, body), in constant
// time.
func SignatureValid(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// envSecret is the one expression a secret may be: a variable of
// acpflow's environment.
var envSecret = regexp.MustCompile(`^\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$`)

// SecretFromEnv reads `secret:` as written: the variable's name when it is
// `${{ env.NAME }}`, else "" (the secret is the text itself).
func SecretFromEnv(s string) string {
	if m := envSecret.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}
