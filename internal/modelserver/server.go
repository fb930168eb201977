package modelserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a running scripted model server on the loopback interface.
type Server struct {
	script Script
	cues   []Cue
	srv    *http.Server
	ln     net.Listener

	mu          sync.Mutex
	log         []Request
	credentials []string
	done        chan struct{} // closed by Close: hanging replies give up
}

// Request is one request the server received, for assertions and for
// debugging an agent that does not do what the script expects.
type Request struct {
	API   string // "anthropic", "openai", "chat" or "gemini"
	Path  string
	Body  []byte
	Reply int // the index of the Script entry that answered it, -1 for a side request
	// Cue is the Carries of the Cue whose script answered it, "" for the
	// Script's.
	Cue string
}

// Cue answers, in place of the Script, a turn request whose conversation
// carries the text Carries (as it is written in the request's JSON): a
// later prompt of the session says something the first did not, and the
// agents send the whole conversation with every request, so a follow-up
// prompt is told from the first without server-side state. Its Script is
// played as the Script is, by the tool results in the request.
type Cue struct {
	Carries string
	Script  Script
}

// maxRequestBody bounds a request's body, as sent and decompressed: the
// agent under test writes it, and acpflow's gateway forwards no more.
const maxRequestBody = 64 << 20

// Start listens on 127.0.0.1 on a free port and serves script.
func Start(script Script) (*Server, error) { return StartCued(script) }

// StartCued is Start with cues: a turn request is answered by the first
// cue whose text it carries, else by script.
func StartCued(script Script, cues ...Cue) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{script: script, cues: cues, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	mux.HandleFunc("POST /v1/responses", s.openai)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /", s.gemini) // /v1beta/models/{model}:{method}
	mux.HandleFunc("/", s.notFound)
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.credentials = append(s.credentials, r.Method+" "+r.URL.Path+" "+credentialOf(r))
		s.mu.Unlock()
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		mux.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server; replies still hanging give up.
func (s *Server) Close() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.srv.Close()
}

// scriptFor is the script that answers a turn request of body, and the
// cue that chose it ("" for the Script).
func (s *Server) scriptFor(body []byte) (Script, string) {
	for _, c := range s.cues {
		if c.Carries != "" && bytes.Contains(body, []byte(c.Carries)) {
			return c.Script, c.Carries
		}
	}
	return s.script, ""
}

// replyTo is the scripted reply to a turn request of body that carries n
// tool results, and its entry in the request log.
func (s *Server) replyTo(body []byte, n int) (Reply, Request) {
	script, cue := s.scriptFor(body)
	return script.at(n), Request{Body: body, Reply: min(n, max(len(script)-1, 0)), Cue: cue}
}

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Credentials are the key each request carried, as "METHOD PATH KEY", in
// the order they came: what a test of a gateway checks the key against.
func (s *Server) Credentials() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.credentials...)
}

// credentialOf is the key of a request, in whichever header or query
// parameter its provider's clients send it ("" for none).
func credentialOf(r *http.Request) string {
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			return strings.TrimPrefix(v, "Bearer ")
		}
	}
	return r.URL.Query().Get("key")
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.log = append(s.log, r)
	s.mu.Unlock()
}

// wait honours a reply's Delay and Hang; it returns false when the client
// went away or the server closed first.
func (s *Server) wait(ctx context.Context, r Reply) bool {
	if r.Hang {
		select {
		case <-ctx.Done():
		case <-s.done:
		}
		return false
	}
	if r.Delay > 0 {
		select {
		case <-time.After(r.Delay):
		case <-ctx.Done():
			return false
		case <-s.done:
			return false
		}
	}
	return true
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.record(Request{API: "unknown", Path: r.Method + " " + r.URL.String(), Reply: -1})
	http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
}

// isGemini reports whether a path is one of the Gemini API's model methods.
func isGemini(path string) bool {
	return strings.Contains(path, "/models/") && strings.Contains(path, ":")
}

// ids numbers the ids of what the server answers (messages, output
// items), as a real API's are unique: agents join a message's chunks by
// the id (ACP's messageId comes from it), so two replies with one id would
// read as one message.
var ids atomic.Int64

// uniqueID is prefix followed by a number no other reply of this process
// has.
func uniqueID(prefix string) string { return fmt.Sprintf("%s%d", prefix, ids.Add(1)) }
