package acpsubagent

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestUpdateCounterCountsSessionUpdateLinesAcrossReads(t *testing.T) {
	in := `{"jsonrpc":"2.0","method":"session/update","params":{"update":{"text":"a"}}}
not json
{"jsonrpc": "2.0", "method" : "session/update", "params": {}}
{"jsonrpc":"2.0","id":3,"result":{"text":"mentions \"method\":\"session/update\" late"}}
{"jsonrpc":"2.0","method":"session/request_permission","id":4}
`
	// One byte per Read: lines span every possible boundary.
	u := &updateCounter{r: iotest.OneByteReader(strings.NewReader(in))}
	out, err := io.ReadAll(u)
	if err != nil || string(out) != in {
		t.Fatalf("the stream was changed: %v", err)
	}
	// The response quotes the method inside a string (escaped quotes): not
	// an update. (A false count would only make quiesce wait its limit.)
	if got := u.count(); got != 2 {
		t.Errorf("counted %d session/update lines, want 2", got)
	}
}
