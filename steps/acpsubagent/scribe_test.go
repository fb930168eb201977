package acpsubagent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/steps/redact"
)

func TestScribeKeepsEveryLineButTheSecretsInIt(t *testing.T) {
	s := newScribe("a", []string{"sk-live-4821", "short"})
	s.add(transcript.ToAgent, []byte(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[{"name":"gh","env":[{"name":"T","value":"sk-live-4821"}]}]}}`+"\n"))
	s.add(transcript.FromAgent, []byte("not json sk-live-4821\n"))
	s.add(transcript.FromAgent, []byte(`{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1","short":true}}`))
	tr := s.done()
	if len(tr.Messages) != 3 {
		t.Fatalf("%d messages, want 3", len(tr.Messages))
	}
	all := ""
	for _, m := range tr.Messages {
		all += string(m.Msg)
	}
	if strings.Contains(all, "sk-live-4821") {
		t.Errorf("a secret reached the transcript: %s", all)
	}
	if !strings.Contains(all, `"value":"[redacted]"`) || !strings.Contains(all, `"not json [redacted]"`) {
		t.Errorf("the secret was not replaced where it was: %s", all)
	}
	if !strings.Contains(all, `"short":true`) {
		t.Errorf("a value shorter than %d characters was scrubbed: %s", redact.MinSecret, all)
	}
	if tr.Messages[0].Dir != transcript.ToAgent || tr.Messages[1].Dir != transcript.FromAgent {
		t.Errorf("directions %s %s", tr.Messages[0].Dir, tr.Messages[1].Dir)
	}
}

func TestScribeFollowsItsSessionAndStopsAtItsBound(t *testing.T) {
	s := newScribe("a", nil)
	s.follow("mine")
	s.add(transcript.FromAgent, []byte(`{"method":"session/update","params":{"sessionId":"other"}}`))
	s.add(transcript.FromAgent, []byte(`{"method":"session/update","params":{"sessionId":"mine"}}`))
	big := `{"method":"x","params":{"t":"` + strings.Repeat("a", transcript.MaxBytes) + `"}}`
	s.add(transcript.FromAgent, []byte(big))
	s.add(transcript.FromAgent, []byte(`{"id":2,"result":{}}`))
	tr := s.done()
	if len(tr.Messages) != 1 || !strings.Contains(string(tr.Messages[0].Msg), `"mine"`) {
		t.Errorf("messages %v, want only the one of session mine", tr.Messages)
	}
	if !tr.Truncated {
		t.Error("a transcript past its bound is not marked truncated")
	}
}

// TestScribeNeverTouchesARecordedPath covers values that are part of a
// path acpflow records, equal one, or hold one (class: ambient and
// explicit values related to the workspace or the cwd), beside a secret
// that is scrubbed all the same.
func TestScribeNeverTouchesARecordedPath(t *testing.T) {
	const (
		ws     = "/home/me/work/project"
		cwd    = "/home/me/work/project/sub"
		secret = "sk-live-secret-4821"
	)
	line := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + cwd + `","note":"` + ws + `/README.md and ` + secret + `"}}`
	for _, tc := range []struct{ name, value string }{
		{"a parent of the workspace (OLDPWD=/home/me)", "/home/me"},
		{"a deeper parent", "/home/me/work"},
		{"the workspace itself", ws},
		{"the cwd, below the workspace", cwd},
		{"a path below the cwd", cwd + "/file.txt"},
		{"a value that holds the workspace (a PYTHONPATH)", ws + "/lib:/usr/lib/python3"},
		{"a word of the workspace's path", "project"},
		{"a path elsewhere on this machine (a credential's file)", "/tmp/creds-elsewhere.json"},
		{"a list of paths", "/usr/bin:/tmp/bin-elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScribe("a", nil, ws)
			s.KeepPaths(cwd)
			s.Add([]string{tc.value, secret})
			s.add(transcript.ToAgent, []byte(line))
			got := string(s.done().Messages[0].Msg)
			if strings.Contains(got, secret) {
				t.Errorf("the secret is kept: %s", got)
			}
			if !strings.Contains(got, `"cwd":"`+cwd+`"`) || !strings.Contains(got, ws+"/README.md and [redacted]") {
				t.Errorf("a recorded path was changed: %s", got)
			}
			if s.Text(tc.value) != tc.value {
				t.Errorf("the value %q is scrubbed from other records", tc.value)
			}
		})
	}
}

// TestScribeMasksTheTemplatedPartsOfAURL covers every place a template
// can sit in an MCP server's url (class: templated url parts), however
// short what it produced, and the one it must leave: a path acpflow
// records.
func TestScribeMasksTheTemplatedPartsOfAURL(t *testing.T) {
	const ws = "/srv/ws"
	render := func(s string) (string, error) {
		return strings.NewReplacer("${{ env.Q }}", "qv-4821", "${{ env.SHORT }}", "ab", "${{ env.USER }}", "bob",
			"${{ env.PASS }}", "pw-secret-77", "${{ inputs.url }}", "https://h.example/sse?k=whole-secret-1",
			"${{ run.workspace }}", ws, "${{ env.EMPTY }}", "").Replace(s), nil
	}
	for _, tc := range []struct{ name, raw, shown string }{
		{"a query value", "https://h.example/sse?k=${{ env.Q }}", "https://h.example/sse?k=[redacted]"},
		{"a short query value", "https://h.example/sse?k=${{ env.SHORT }}&v=1", "https://h.example/sse?k=[redacted]&v=1"},
		{"a path segment", "https://h.example/t/${{ env.Q }}/sse", "https://h.example/t/[redacted]/sse"},
		{"userinfo", "https://${{ env.USER }}:${{ env.PASS }}@h.example/sse", "https://[redacted]:[redacted]@h.example/sse"},
		{"a fragment", "https://h.example/sse#${{ env.Q }}", "https://h.example/sse#[redacted]"},
		{"the whole url", "${{ inputs.url }}", "[redacted]"},
		{"several templates", "https://h.example/${{ env.Q }}?a=${{ env.SHORT }}&b=${{ env.PASS }}", "https://h.example/[redacted]?a=[redacted]&b=[redacted]"},
		{"an empty value and a recorded path stay", "https://h.example${{ run.workspace }}?k=${{ env.EMPTY }}", "https://h.example" + ws + "?k="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pieces, err := redact.RenderPieces(tc.raw, render)
			if err != nil {
				t.Fatal(err)
			}
			sent := redact.Joined(pieces)
			s := newScribe("a", nil, ws)
			s.AddMask(pieces)
			s.Add(redact.Produced(pieces))
			line := `{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"` + ws + `","mcpServers":[{"name":"docs","type":"sse","url":"` + sent + `","headers":[]}]}}`
			s.add(transcript.ToAgent, []byte(line))
			var msg struct {
				Params struct {
					Cwd        string `json:"cwd"`
					MCPServers []struct {
						URL string `json:"url"`
					} `json:"mcpServers"`
				} `json:"params"`
			}
			if err := json.Unmarshal(s.done().Messages[0].Msg, &msg); err != nil {
				t.Fatal(err)
			}
			if got := msg.Params.MCPServers[0].URL; got != tc.shown {
				t.Errorf("url recorded as %q, want %q", got, tc.shown)
			}
			if msg.Params.Cwd != ws {
				t.Errorf("cwd recorded as %q", msg.Params.Cwd)
			}
			if got := s.Text("the agent said: " + sent); got != "the agent said: "+tc.shown {
				t.Errorf("the url in the agent's words became %q", got)
			}
		})
	}
}

// TestScribeTellsASecretStartingWithASlashFromAPath covers values that
// start with "/" but are no path of this machine (class: a base64 key):
// they are secrets.
func TestScribeTellsASecretStartingWithASlashFromAPath(t *testing.T) {
	for _, v := range []string{"/Xk3+abcdEFGH/ijkl=", "/k3yMaterialWithNoDir", "/usr/bin:/Xk3+abcd/efgh"} {
		s := newScribe("a", []string{v}, "/srv/ws")
		if got := s.Text("key " + v); got != "key [redacted]" {
			t.Errorf("%q: scrubbed into %q", v, got)
		}
	}
}

// TestScribeFindsAURLEscapedAsAcpflowSendsIt covers the bytes a url with
// & can take on the wire (class: encoding/json's \u0026, another
// encoder's &), and a line without it, which is kept byte for byte.
func TestScribeFindsAURLEscapedAsAcpflowSendsIt(t *testing.T) {
	pieces := []redact.Piece{{Text: "https://h.example/sse?a=1&k="}, {Text: "qv-secret-4821", Templated: true}}
	s := newScribe("a", redact.Produced(pieces), "/srv/ws")
	s.AddMask(pieces)
	s.add(transcript.ToAgent, []byte(`{"id":1,"params":{"url":"https://h.example/sse?a=1\u0026k=qv-secret-4821"}}`))
	s.add(transcript.FromAgent, []byte(`{"id":2,"params":{"url":"https://h.example/sse?a=1&k=qv-secret-4821"}}`))
	untouched := `{"z":1,"a":{"y":"https://h.example/sse?a=1&k="}}`
	s.add(transcript.FromAgent, []byte(untouched))
	msgs := s.done().Messages
	for _, m := range msgs[:2] {
		if !strings.Contains(string(m.Msg), `"url":"https://h.example/sse?a=1&k=[redacted]"`) {
			t.Errorf("recorded %s", m.Msg)
		}
	}
	if string(msgs[2].Msg) != untouched {
		t.Errorf("a line without a secret became %s", msgs[2].Msg)
	}
}
