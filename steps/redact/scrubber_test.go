package redact_test

import (
	"strings"
	"testing"

	"github.com/acpflow/acpflow/steps/redact"
)

// TestAStreamScrubbedPieceByPieceNeverPassesOnASecret covers a stream
// that arrives in two pieces split at every byte (class: a secret before,
// across and after the split; two secrets, one inside the other; a
// multi-byte character by the split): what Cut lets through, scrubbed, is
// the whole stream scrubbed, and no piece passed on holds a secret or the
// beginning of one.
func TestAStreamScrubbedPieceByPieceNeverPassesOnASecret(t *testing.T) {
	secrets := []string{"sk-live-48215", "live-48"}
	s := redact.New(secrets)
	for _, stream := range []string{
		"token sk-live-48215 end",
		"sk-live-48215sk-live-48215",
		"é sk-live-48215 é and live-48 ü",
		"no secret here at all, just words",
	} {
		for split := 0; split <= len(stream); split++ {
			var passed []string
			held := ""
			for _, piece := range []string{stream[:split], stream[split:]} {
				held += piece
				cut := s.Cut(held)
				passed = append(passed, held[:cut])
				held = held[cut:]
			}
			passed = append(passed, held) // the stream's end
			var out strings.Builder
			for _, p := range passed {
				scrubbed := s.Text(p)
				for _, v := range append(secrets, "sk-live") {
					if strings.Contains(scrubbed, v) {
						t.Errorf("%q split at %d: passed on %q", stream, split, scrubbed)
					}
				}
				out.WriteString(scrubbed)
			}
			if want := s.Text(stream); out.String() != want {
				t.Errorf("%q split at %d: %q, want %q", stream, split, out.String(), want)
			}
		}
	}
	if n := redact.New(nil).Cut("anything"); n != len("anything") {
		t.Errorf("without secrets Cut holds back %d bytes", len("anything")-n)
	}
}
