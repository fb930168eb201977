package shell

import (
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/redact"
)

// A shell step records what its command printed, which may hold any value
// the command was given: its stdout and stderr, its error with stderr's
// tail, its events. It scrubs them of the same secrets an agent step
// scrubs its records of (package redact), so that a token a workflow hands
// a deploy script is "[redacted]" in the result, the store, the terminal
// and the UI, as it is when an agent prints it.

// scrubbingSink scrubs the events that carry the command's words before
// they reach the run's sink (the terminal, --json, the run store).
type scrubbingSink struct {
	next  steps.Sink
	scrub *redact.Scrubber
}

func (r scrubbingSink) Emit(ev steps.Event) {
	if !r.scrub.Empty() {
		ev.Data = scrubEvent(r.scrub, ev.Data)
	}
	r.next.Emit(ev)
}

// scrubEvent is d with the words that came of the command, or of the env
// policy that saw its values, scrubbed.
func scrubEvent(s *redact.Scrubber, d steps.EventData) steps.EventData {
	switch x := d.(type) {
	case Stdout:
		x.Text = s.Text(x.Text)
		return x
	case Teardown:
		x.Error = s.Text(x.Error)
		return x
	case Env:
		x.PolicyStderr = s.Text(x.PolicyStderr)
		return x
	case steps.Warning:
		x.Message = s.Text(x.Message)
		return x
	}
	return d
}
