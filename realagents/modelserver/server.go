package modelserver

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server is a running scripted model server on the loopback interface.
type Server struct {
	script Script
	srv    *http.Server
	ln     net.Listener

	mu   sync.Mutex
	log  []Request
	done chan struct{} // closed by Close: hanging replies give up
}

// Request is one request the server received, for assertions and for
// debugging an agent that does not do what the script expects.
type Request struct {
	API   string // "anthropic", "openai" or "gemini"
	Path  string
	Body  []byte
	Reply int // the index of the Script entry that answered it, -1 for a side request
}

// Start listens on 127.0.0.1 on a free port and serves script.
func Start(script Script) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{script: script, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.anthropic)
	mux.HandleFunc("POST /v1/responses", s.openai)
	mux.HandleFunc("POST /", s.gemini) // /v1beta/models/{model}:{method}
	mux.HandleFunc("/", s.notFound)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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

// Requests returns what the server received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
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
