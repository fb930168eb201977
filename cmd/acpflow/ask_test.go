package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acpflow/acpflow/policies"
)

// A line far longer than any answer (a paste gone wrong) is no answer:
// the person is asked again, and the terminal is not taken for closed.
func TestAnOverlongLineAtTheTerminalIsNoAnswer(t *testing.T) {
	in := strings.NewReader(strings.Repeat("9", 200<<10) + "\n2\n")
	out := &askedBuffer{asked: make(chan struct{})}
	a := &termAsker{out: out, turn: make(chan struct{}, 1), lines: make(chan string)}
	q := &policies.Question{Request: &policies.PermissionRequest{Request: policies.Request{Step: "s", Agent: "a"}, Options: []policies.Option{
		{ID: "yes", Name: "Allow", Kind: "allow_once"}, {ID: "no", Name: "Reject", Kind: "reject_once"},
	}}, Rule: "rules[0]"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The reader starts once the question is out, so that no line is
	// taken for one typed before it.
	done := make(chan struct{})
	var got string
	var err error
	go func() { got, err = a.pick(ctx, q); close(done) }()
	<-out.asked
	go a.read(in)
	<-done
	if err != nil || got != "no" {
		t.Fatalf("Ask = %q, %v; want the second option\n%s", got, err, out.String())
	}
	if !strings.Contains(out.String(), "answer with a number from 1 to 2") || strings.Contains(out.String(), "terminal closed") {
		t.Errorf("the terminal said:\n%s", out.String())
	}
}

// askedBuffer is the terminal's output; asked closes at the first write
// (the question).
type askedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	asked chan struct{}
	once  sync.Once
}

func (w *askedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.once.Do(func() { close(w.asked) })
	return w.b.Write(p)
}

func (w *askedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
