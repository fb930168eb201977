package acpsubagent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	gojson "github.com/goccy/go-json"
)

// maxLine is the longest line the gate passes on. The SDK's reader fails
// on lines over 10 MiB and then reports only that the connection closed;
// the gate stops first and says why.
const maxLine = 10<<20 - 1

// maxPendingUpdates bounds the session/update notifications that the SDK
// has read but our client has not yet handled. The SDK queues them in a
// channel of 1024 and closes the connection when it is full, so a burst of
// streamed tokens would kill the turn; the gate holds the agent's stdout
// instead (the agent then blocks on its own write: backpressure).
const maxPendingUpdates = 256

// maxHeldRequests bounds the agent's requests read but not yet answered
// (the answer written to its stdin). The SDK serves each on a goroutine of
// its own, holding the request, for as long as its answer takes; the gate
// stops reading past this many (backpressure, as for updates). The client
// refuses permission requests past maxWaitingPermissions at once, so only
// an agent that does not read its answers meets this bound.
const maxHeldRequests = 4 * maxWaitingPermissions

// stdoutGate is the agent's stdout as the SDK reads it: whole lines, each
// session/update counted, no more than maxPendingUpdates of them ahead of
// the client, no more than maxHeldRequests of its requests unanswered,
// other notifications (which nothing here handles) dropped, an over-long
// line turned into an error that names it, and so is a line that is not
// JSON during a turn.
type stdoutGate struct {
	r    *bufio.Reader
	line []byte // what is left of the line being passed on

	mu      sync.Mutex
	cond    *sync.Cond
	passed  int64 // session/update lines passed on
	handled int64 // session/update notifications the client has handled
	dropped int64 // other notifications, dropped
	closed  bool
	err     error // why the stream was cut short

	// asked counts the permission requests passed on, answered those the
	// handler has answered and recorded (awaitAnswers).
	asked, answered int64
	// requests counts every request passed on, responses the answers
	// written to the agent (answerWritten): the difference is what the
	// SDK holds (maxHeldRequests).
	requests, responses int64
	// turns counts the turns running on the connection: a line that is
	// not JSON fails the turn then (nonProtocolLine), and is noise otherwise.
	turns int

	// tap, when set, sees every line passed on to the SDK (the transcript).
	tap func(line []byte)
	// held, when not nil, holds the first Read until it is closed (hold,
	// release): the SDK's reader starts with its Connection, before the
	// connection's logger is set.
	held chan struct{}
}

// hold makes the first Read wait for release.
func (g *stdoutGate) hold() { g.held = make(chan struct{}) }

// release lets Read go on, and makes what was done before it (the
// connection's set-up) happen before every Read.
func (g *stdoutGate) release() { close(g.held) }

func newStdoutGate(r io.Reader) *stdoutGate {
	g := &stdoutGate{r: bufio.NewReaderSize(r, 64<<10)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Read implements io.Reader for the SDK.
func (g *stdoutGate) Read(p []byte) (int, error) {
	if g.held != nil {
		<-g.held
	}
	for len(g.line) == 0 {
		line, err := g.readLine()
		if len(line) == 0 {
			if err == nil {
				err = io.EOF
			}
			return 0, err
		}
		kind := classify(line)
		switch kind {
		case lineUpdate:
			if !g.admit() {
				return 0, io.EOF
			}
		case lineOtherNotification:
			g.mu.Lock()
			g.dropped++
			g.mu.Unlock()
			continue
		case linePermission, lineRequest:
			g.admitRequest(kind == linePermission)
		}
		if g.tap != nil {
			g.tap(line)
		}
		if kind == lineNotJSON && g.inTurn() {
			g.fail(newNonProtocolLine(line))
			return 0, g.err
		}
		g.line = line
	}
	n := copy(p, g.line)
	g.line = g.line[n:]
	return n, nil
}

// readLine returns the next line with its newline (the last one may lack
// it). A line longer than maxLine ends the stream with g.err set.
func (g *stdoutGate) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := g.r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			g.fail(fmt.Errorf("wrote a line of more than %d MiB on stdout; an ACP message must be one JSON line of at most that", (maxLine+1)>>20))
			return nil, g.err
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// admit waits until the client has room for one more update; false once
// the gate is closed.
func (g *stdoutGate) admit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.passed-g.handled >= maxPendingUpdates && !g.closed {
		g.cond.Wait()
	}
	if g.closed {
		return false
	}
	g.passed++
	return true
}

// admitRequest waits until fewer than maxHeldRequests of the agent's
// requests are unanswered, or the gate is closed, and counts one more (a
// permission request in asked too). Once closed it waits no more, and the
// request is still passed on: one the agent sends as it is torn down is
// answered and recorded (awaitAnswers).
func (g *stdoutGate) admitRequest(permission bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.requests-g.responses >= maxHeldRequests && !g.closed {
		g.cond.Wait()
	}
	g.requests++
	if permission {
		g.asked++
	}
}

// answerWritten is called for every answer written to the agent.
func (g *stdoutGate) answerWritten() {
	g.mu.Lock()
	g.responses++
	g.mu.Unlock()
	g.cond.Broadcast()
}

// turnBegins and turnEnds bracket a turn (session/prompt until its end):
// within one, a line that is not JSON fails it (nonProtocolLine).
func (g *stdoutGate) turnBegins() {
	g.mu.Lock()
	g.turns++
	g.mu.Unlock()
}

func (g *stdoutGate) turnEnds() {
	g.mu.Lock()
	g.turns--
	g.mu.Unlock()
}

func (g *stdoutGate) inTurn() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.turns > 0
}

// handledOne is called by the client for every session/update it handles.
func (g *stdoutGate) handledOne() {
	g.mu.Lock()
	g.handled++
	g.mu.Unlock()
	g.cond.Broadcast()
}

// caughtUp reports whether the client has handled every update passed on.
func (g *stdoutGate) caughtUp() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.handled >= g.passed
}

// close releases a reader waiting for room: the step is over.
func (g *stdoutGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *stdoutGate) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
}

// cause is why the gate cut the stream, or nil.
func (g *stdoutGate) cause() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// droppedNotifications counts notifications other than session/update.
func (g *stdoutGate) droppedNotifications() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dropped
}

type lineKind uint8

const (
	lineOther             lineKind = iota // a response, a blank line, a JSON object the SDK judges
	lineUpdate                            // a session/update notification
	lineOtherNotification                 // any other notification
	linePermission                        // a session/request_permission request
	lineRequest                           // any other request
	lineNotJSON                           // not a JSON object: no message at all
)

// classify looks at a line's top-level id and method.
func classify(line []byte) lineKind {
	var head struct {
		ID     gojson.RawMessage `json:"id"`
		Method string            `json:"method"`
	}
	if gojson.Unmarshal(line, &head) != nil {
		return notJSON(line)
	}
	if head.Method == "" {
		return lineOther
	}
	if head.ID != nil {
		if head.Method == acp.ClientMethodSessionRequestPermission {
			return linePermission
		}
		return lineRequest
	}
	switch head.Method {
	case "session/update":
		return lineUpdate
	case "$/cancel_request":
		// The SDK handles it itself, at once, outside the queue.
		return lineOther
	}
	return lineOtherNotification
}

// awaitHandled waits, at most limit, until every update read so far has
// been handed to the handler.
func (g *stdoutGate) awaitHandled(limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !g.caughtUp() {
		time.Sleep(time.Millisecond)
	}
}

// answeredOne is called by the handler for every permission request it has
// answered, once its record is made.
func (g *stdoutGate) answeredOne() {
	g.mu.Lock()
	g.answered++
	g.mu.Unlock()
}

// awaitAnswers waits, at most limit, until the stream has ended (done:
// every line read) and every permission request passed on has been
// answered and recorded: a request the agent sent as it was torn down is
// on the run's record before the run ends. The SDK hands each request to
// the handler on a goroutine of its own, so the end of the stream does not
// say the handler has run.
func (g *stdoutGate) awaitAnswers(done <-chan struct{}, limit time.Duration) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return
	}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		settled := g.answered >= g.asked
		g.mu.Unlock()
		if settled {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
