package acpsubagent

import (
	"bytes"
	"io"
	"regexp"
	"sync/atomic"
)

// updateCounter passes the agent's stdout through and counts the lines that
// are session/update notifications, so that a step whose agent died can
// wait until the SDK has handed every one of them over (client.quiesce).
type updateCounter struct {
	r       io.Reader
	n       atomic.Int64
	head    []byte // the start of the current line, enough to find its method
	counted bool   // the current line was counted already
}

// headBytes is how much of a line is looked at: "method" comes first or
// second in every agent's messages seen so far.
const headBytes = 1024

var updateMethod = regexp.MustCompile(`"method"\s*:\s*"session/update"`)

func (u *updateCounter) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	b := p[:n]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !u.counted && len(u.head) < headBytes {
			u.head = append(u.head, part[:min(len(part), headBytes-len(u.head))]...)
			if updateMethod.Match(u.head) {
				u.n.Add(1)
				u.counted = true
			}
		}
		if i < 0 {
			break
		}
		u.head, u.counted = u.head[:0], false
		b = b[i+1:]
	}
	return n, err
}

func (u *updateCounter) count() int64 { return u.n.Load() }
