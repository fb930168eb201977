package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"sync"
)

// message is any JSON-RPC message as read from the client. A request has an id and a method,
// a notification a method only, a response an id only.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// outgoing is a message the agent writes. Result and Params are left out only when nil.
type outgoing struct {
	JSONRPC string    `json:"jsonrpc"`
	ID      any       `json:"id,omitempty"`
	Method  string    `json:"method,omitempty"`
	Params  any       `json:"params,omitempty"`
	Result  any       `json:"result,omitempty"`
	Error   *rpcError `json:"error,omitempty"`
}

// wire is the agent's stdout, and its own requests waiting for the client's answers.
type wire struct {
	rec     *recorder
	garbage bool

	mu sync.Mutex // one message per write, in one piece
	w  io.Writer

	pmu     sync.Mutex
	nextID  int
	pending map[string]*call
}

// call is a request of the agent's waiting for its response.
type call struct {
	done chan message // receives the response, once
	// onResponse runs on the reader goroutine when the response arrives, even if nobody
	// waits for done any more (a cancelled turn), so that late answers are recorded too.
	onResponse func(message)
}

func newWire(w io.Writer, garbage bool, rec *recorder) *wire {
	return &wire{w: w, garbage: garbage, rec: rec, pending: make(map[string]*call)}
}

// send writes one message; on a write error (the client is gone: EPIPE) the agent exits, so
// that no goroutine stays blocked on a stdout nobody reads.
func (w *wire) send(m outgoing) {
	m.JSONRPC = "2.0"
	line, err := json.Marshal(m)
	if err != nil {
		panic(err) // the agent only sends what it built itself
	}
	line = append(line, '\n')
	if w.garbage {
		line = append([]byte("this is not json\n{broken\n"), line...)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.w.Write(line); err != nil {
		w.rec.event("stdout_error", map[string]any{"error": err.Error()})
		os.Exit(1)
	}
}

func (w *wire) result(id json.RawMessage, result any) {
	w.send(outgoing{ID: id, Result: result})
}

func (w *wire) fail(id json.RawMessage, code int, msg string, data any) {
	w.send(outgoing{ID: id, Error: &rpcError{Code: code, Message: msg, Data: data}})
}

func (w *wire) notify(method string, params any) {
	w.send(outgoing{Method: method, Params: params})
}

// request sends a request of the agent's and returns the channel its response will come on.
func (w *wire) request(method string, params any, onResponse func(message)) <-chan message {
	w.pmu.Lock()
	w.nextID++
	id := w.nextID
	c := &call{done: make(chan message, 1), onResponse: onResponse}
	w.pending[strconv.Itoa(id)] = c
	w.pmu.Unlock()
	w.send(outgoing{ID: id, Method: method, Params: params})
	return c.done
}

// deliver hands a response to the request it answers; responses to nothing are dropped.
func (w *wire) deliver(m message) {
	key := string(bytes.TrimSpace(m.ID))
	w.pmu.Lock()
	c := w.pending[key]
	delete(w.pending, key)
	w.pmu.Unlock()
	if c == nil {
		return
	}
	if c.onResponse != nil {
		c.onResponse(m)
	}
	c.done <- m
}

// readMessages calls handle for every JSON line of r until EOF or a read error. Lines that are
// not JSON are skipped, as a lenient agent would.
func readMessages(r io.Reader, handle func(message)) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m message
			if json.Unmarshal(line, &m) == nil {
				handle(m)
			}
		}
		if err != nil {
			return
		}
	}
}
