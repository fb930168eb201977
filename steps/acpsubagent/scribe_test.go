package acpsubagent

import (
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript"
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
		t.Errorf("a value shorter than %d characters was scrubbed: %s", minSecret, all)
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
