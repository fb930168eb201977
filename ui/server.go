// Package ui is `acpflow ui`: a local web page over the run store, with
// the runs and batches, a run's DAG (drawn by ui/dag), its timeline, each
// step's output, transcript and permission decisions, and a policy what-if
// page, updated live as runs go on. It serves HTML rendered on the server
// with html/template (so every text an agent wrote is escaped, never
// markup), one small script of its own for the live updates and the cancel
// button, and a JSON API of the shapes `acpflow runs --json` and `show
// --json` print.
//
// It reads the store read-only (runs.OpenReadOnly); its one action is to
// interrupt a running run the way Ctrl-C does (runs.Service.Interrupt).
// Every request needs the server's token, on loopback too: every local
// user, and every sandboxed agent with the network, reaches a loopback
// port (docs/ui.md#safety).
package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/ui/dag"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Config is what `acpflow ui` passes the server.
type Config struct {
	// Store is the run store, opened read-only.
	Store *runs.Service
	// Token is required of every request (Authorization: Bearer, or the
	// cookie that ?token= sets), whatever the address: New refuses "".
	Token string
	// Outer is the outer policy the what-if page decides within, as
	// `acpflow policy test` does; nil: none.
	Outer policies.Outer
	// Poll is how often the store is looked at for changes (0: 50 ms).
	Poll time.Duration
	// TraceURL is where a run's trace is seen, {trace_id} standing for
	// its id (docs/traces.md); "": the run page names the id unlinked.
	TraceURL string
}

// Server serves the UI over one store.
type Server struct {
	cfg   Config
	tmpl  *template.Template
	hub   *hub
	hosts map[string]bool // the Host headers accepted; nil: any (a wildcard bind, which a token guards)
	wf    *workflowCache
	// batches keeps the counts of batches that ended.
	batches batchCache
}

// CookieName is the cookie ?token= sets.
const CookieName = "acpflow_ui_token"

// New is a server over cfg.Store.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("ui: no store")
	}
	if cfg.Token == "" {
		return nil, errors.New("ui: no token: every request must carry one (NewToken makes one)")
	}
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	t, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	return &Server{cfg: cfg, tmpl: t, hub: newHub(cfg.Store, cfg.Poll), wf: newWorkflowCache()}, nil
}

// IsLoopback says whether addr (host:port) binds only to the loopback
// interface: a loopback IP, or the name localhost.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewToken is a random token (128 bits from crypto/rand, base32): what
// `acpflow ui` serves under when it is given none, new at each start.
func NewToken() string {
	return rand.Text()
}

// Serve serves on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	addr := ln.Addr().String()
	s.hosts = allowedHosts(addr)
	dag.Warm(ctx)
	if err := s.hub.start(ctx); err != nil {
		return fmt.Errorf("ui: watch the store: %w", err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		return nil
	}
}

// allowedHosts are the Host headers a request may carry: the address
// bound, and for a loopback one every loopback name with its port, so
// that a page of another site whose name was rebound to 127.0.0.1 (DNS
// rebinding) is refused. nil for a wildcard address (0.0.0.0, ::), which
// serves under any name and is guarded by its token.
func allowedHosts(addr string) map[string]bool {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return nil
	}
	hosts := map[string]bool{addr: true, net.JoinHostPort(host, port): true}
	if IsLoopback(addr) {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			hosts[net.JoinHostPort(h, port)] = true
		}
	}
	return hosts
}

// Handler is the UI's routes behind its guards.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /assets/dag.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		fmt.Fprint(w, dag.CSS)
	})
	mux.HandleFunc("GET /{$}", s.runsPage)
	mux.HandleFunc("GET /runs/{id}", s.runPage)
	mux.HandleFunc("GET /runs/{id}/graph", s.graphFragment)
	mux.HandleFunc("GET /runs/{id}/steps/{step}", s.stepPage)
	mux.HandleFunc("GET /whatif", s.whatIfPage)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("GET /api/runs", s.apiRuns)
	mux.HandleFunc("GET /api/runs/{id}", s.apiRun)
	mux.HandleFunc("POST /api/runs/{id}/cancel", s.apiCancel)
	mux.HandleFunc("/", s.notFound)
	mux.HandleFunc("GET /approvals", s.approvalsPage)
	mux.HandleFunc("GET /api/approvals", s.apiApprovals)
	mux.HandleFunc("POST /api/approvals/{id}", s.apiAnswer)
	mux.HandleFunc("GET /approvals/{id}/answer", s.answerLink)
	mux.HandleFunc("POST /approvals/{id}/answer", s.answerLink)
	return s.guard(mux)
}

// guard sets the headers every answer carries and refuses what is not
// for this server: another Host, a request without the token, a change
// (any method but GET and HEAD) from anywhere but the UI's own page.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if s.hosts != nil && !s.hosts[r.Host] {
			http.Error(w, fmt.Sprintf("acpflow ui: Host %q is not this server's address; open it by the address it printed", r.Host), http.StatusMisdirectedRequest)
			return
		}
		if isAnswerLink(r.URL.Path) {
			next.ServeHTTP(w, r) // its signature is its authority (answerLink)
			return
		}
		if !s.authorized(w, r) {
			return
		}
		if !safeMethod(r.Method) && !sameOrigin(r) {
			refuse(w, r, http.StatusForbidden, "a request that changes something must come from the UI's own page: its Origin header must be "+
				"http://"+r.Host+" (a script sends it: curl -H 'Origin: http://"+r.Host+"')")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// safeMethod is a method that changes nothing on this server.
func safeMethod(m string) bool { return m == http.MethodGet || m == http.MethodHead }

// sameOrigin says a change comes from the UI's own page: its Origin is
// this server's scheme, host and port, as the request's Host names them.
// A request without Origin is refused: the token alone does not say who
// sent it, and a browser always sends Origin with a POST.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme == "http" && u.Host == r.Host && u.Path == "" && u.User == nil && u.RawQuery == ""
}

// authorized checks the token: a Bearer header, the cookie, or ?token=
// on a GET, which sets the cookie and sends the browser on to the same
// address without it (so the token stays out of its history). It answers
// a request it refuses.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	if t := q.Get("token"); t != "" && safeMethod(r.Method) && s.tokenIs(t) {
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.cfg.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("token")
		http.Redirect(w, r, localAddress(r.URL.EscapedPath(), q), http.StatusSeeOther)
		return false
	}
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenIs(a) {
		return true
	}
	if c, err := r.Cookie(CookieName); err == nil && s.tokenIs(c.Value) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="acpflow ui"`)
	refuse(w, r, http.StatusUnauthorized, "this server needs its token: open the address `acpflow ui` printed "+
		"(it carries ?token= once, and the browser keeps a cookie), or send Authorization: Bearer TOKEN")
	return false
}

// localAddress is path?query as a redirect on this server: a path that a
// browser would read as another host's (//evil.example) is the root.
func localAddress(path string, q url.Values) string {
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || strings.HasPrefix(path, "/\\") {
		path = "/"
	}
	if len(q) > 0 {
		return path + "?" + q.Encode()
	}
	return path
}

// refuse answers a request the guard turns away, in JSON for the API and
// as text for a page; msg says how to get in, and nothing of the store.
func refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSON(w, code, map[string]any{"error": "acpflow ui: " + msg})
		return
	}
	http.Error(w, "acpflow ui: "+msg, code)
}

func (s *Server) tokenIs(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}
