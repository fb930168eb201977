package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// uiServer is a running `acpflow ui`.
type uiServer struct {
	cmd   *exec.Cmd
	url   string // http://127.0.0.1:PORT, without the token
	link  string // the address it printed
	token string // the token the link carries; "" when it carries none
	out   string // what it printed up to the link
	// stop interrupts it and waits for its exit, once.
	stop func() error
}

// startUI starts `acpflow ui` on a free loopback port over state (args
// may name another --addr) and returns once it printed its address; the
// test's cleanup interrupts it and proves it exited.
func startUI(t *testing.T, state string, args ...string) *uiServer {
	t.Helper()
	return startUIWith(t, nil, state, args...)
}

// startUIWith is startUI with env added to the environment.
func startUIWith(t *testing.T, env []string, state string, args ...string) *uiServer {
	t.Helper()
	args = append([]string{"ui", "--state", state, "--addr", "127.0.0.1:0"}, args...)
	cmd := exec.Command(acpflowBin, args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &uiServer{cmd: cmd}
	s.stop = sync.OnceValue(func() error {
		cmd.Process.Signal(os.Interrupt)
		return cmd.Wait()
	})
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("acpflow ui did not exit cleanly on SIGINT: %v\n%s", err, stderr.String())
		}
	})
	var printed strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if rest, ok := strings.CutPrefix(sc.Text(), "acpflow ui: open "); ok {
			s.link = rest
			break
		}
	}
	s.out = printed.String()
	u, err := url.Parse(s.link)
	if s.link == "" || err != nil {
		t.Fatalf("acpflow ui printed no address (%v)\n%s%s", err, s.out, stderr.String())
	}
	s.token = u.Query().Get("token")
	s.url = "http://" + u.Host
	go io.Copy(io.Discard, out)
	return s
}

// get is one request to the server, redirects not followed; h are header
// name, value pairs.
func (s *uiServer) get(t *testing.T, method, path string, h ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(h); i += 2 {
		req.Header.Set(h[i], h[i+1])
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		body, _ = io.ReadAll(io.LimitReader(resp.Body, 16)) // a stream: its first bytes
	} else {
		body, _ = io.ReadAll(resp.Body)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// recordShellRun records one finished run of a shell step in state and
// returns its id.
func recordShellRun(t *testing.T, dir, state string) string {
	t.Helper()
	wf := filepath.Join(dir, "hello.yaml")
	os.WriteFile(wf, []byte("name: hello\nsteps:\n  - id: greet\n    run: echo the-output-of-greet\n"), 0o644)
	if r := acpflow(t, dir, "run", wf, "--state", state); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	return firstRunID(t, acpflow(t, dir, "runs", "--state", state, "--json").stdout)
}

// firstRunID is the run_id of the first run of lines, as runs --json
// prints them.
func firstRunID(t *testing.T, lines string) string {
	t.Helper()
	first, _, _ := strings.Cut(lines, "\n")
	var run struct {
		ID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(first), &run); err != nil || run.ID == "" {
		t.Fatalf("no run id in %q: %v", lines, err)
	}
	return run.ID
}

// `acpflow ui` on every interface prints a link one can open: the
// machine's name, not the wildcard address it listens on, with the token.
func TestTheUIOnEveryInterfacePrintsALinkThatOpens(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	if r := acpflow(t, dir, "runs", "--state", state); r.code != 0 {
		t.Fatalf("runs: exit %d\n%s", r.code, r.stderr)
	}
	s := startUI(t, state, "--addr", "0.0.0.0:0")
	u, _ := url.Parse(s.link)
	if h := u.Hostname(); h == "::" || h == "0.0.0.0" || h == "" {
		t.Errorf("the link %s names the wildcard address", s.link)
	}
	if s.token == "" {
		t.Errorf("the link %s carries no token", s.link)
	}
	// The machine's name may not resolve here: reach the same port on
	// loopback, with the Host the link names.
	req, _ := http.NewRequest("GET", "http://127.0.0.1:"+u.Port()+u.RequestURI(), nil)
	req.Host = u.Host
	jar, _ := cookiejar.New(nil) // the token is traded for a cookie, then redirected
	resp, err := (&http.Client{Jar: jar}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", s.link, resp.Status)
	}
}

// Every local user, and every sandboxed agent with the network, reaches a
// loopback port: on loopback too, nothing is served without the token.
func TestTheUINeedsItsTokenOnLoopbackToo(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	id := recordShellRun(t, dir, state)
	pages := []string{"/", "/runs/" + id, "/runs/" + id + "/steps/greet", "/runs/" + id + "/graph", "/whatif", "/events", "/api/runs", "/api/runs/" + id}
	tokens := map[string]bool{}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			if ln, err := net.Listen("tcp", addr); err != nil {
				t.Skipf("no %s here: %v", addr, err)
			} else {
				ln.Close()
			}
			s := startUI(t, state, "--addr", addr)
			if s.token == "" || len(s.token) < 26 {
				t.Fatalf("the link %q carries no token of 128 bits", s.link)
			}
			tokens[s.token] = true
			for _, p := range pages {
				for name, h := range map[string][]string{
					"no token":       nil,
					"a wrong token":  {"Authorization", "Bearer " + strings.ToUpper(s.token) + "x"},
					"its prefix":     {"Authorization", "Bearer " + s.token[:len(s.token)-1]},
					"a wrong cookie": {"Cookie", "acpflow_ui_token=" + s.token + "0"},
				} {
					code, _, body := s.get(t, "GET", p, h...)
					if code != http.StatusUnauthorized || strings.Contains(body, id) || strings.Contains(body, "greet") || !strings.Contains(body, "open the address `acpflow ui` printed") {
						t.Errorf("GET %s with %s: %d %q; want 401 saying how to get in, and no data", p, name, code, body)
					}
				}
				if code, _, body := s.get(t, "GET", p, "Authorization", "Bearer "+s.token); code != http.StatusOK {
					t.Errorf("GET %s with the token as Bearer: %d %q", p, code, body)
				}
			}
			// The printed link: a cookie, then the same address without the token.
			code, h, _ := s.get(t, "GET", "/runs/"+id+"?token="+s.token)
			loc, cookie := h.Get("Location"), h.Get("Set-Cookie")
			if code != http.StatusSeeOther || loc != "/runs/"+id {
				t.Errorf("?token=: %d to %q, want 303 to /runs/%s", code, loc, id)
			}
			for _, attr := range []string{"acpflow_ui_token=" + s.token, "HttpOnly", "SameSite=Strict", "Path=/"} {
				if !strings.Contains(cookie, attr) {
					t.Errorf("the cookie %q lacks %s", cookie, attr)
				}
			}
			val, _, _ := strings.Cut(cookie, ";")
			for _, p := range pages {
				if code, _, _ := s.get(t, "GET", p, "Cookie", val); code != http.StatusOK {
					t.Errorf("GET %s with the cookie alone: %d", p, code)
				}
			}
			if code, h, _ := s.get(t, "GET", "/?token=wrong-token-wrong-token"); code != http.StatusUnauthorized || h.Get("Set-Cookie") != "" {
				t.Errorf("?token=wrong: %d, cookie %q; want 401, no cookie", code, h.Get("Set-Cookie"))
			}
		})
	}
	if len(tokens) == 1 {
		t.Error("two starts printed the same token; want a new random one at each start")
	}
}

// startHangingRun starts `acpflow run` of one step whose agent never
// answers its prompt, and returns once the agent has it; exited is closed
// when the run's process exits (its error in *exit). The cleanup kills a
// run still going.
func startHangingRun(t *testing.T, dir, state, record string) (exited chan struct{}, exit *error) {
	t.Helper()
	wf := filepath.Join(dir, "hang.yaml")
	os.WriteFile(wf, []byte(fmt.Sprintf(`name: hang
agents:
  slow: {command: %s, args: %s}
steps:
  - id: wait
    uses: acp-subagent
    with: {agent: slow, prompt: hi}
`, testAgent, agentArgs("-record", record, "-prompt-hang"))), 0o644)
	run := exec.Command(acpflowBin, "run", wf, "--state", state)
	run.Dir = dir
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	exited, exit = make(chan struct{}), new(error)
	go func() { *exit = run.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			run.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(time.Minute) // a hang guard
	for !hasEvent(t, record, "prompt") {
		if time.Now().After(deadline) {
			t.Fatal("the agent never got the prompt")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return exited, exit
}

// Cancelling a run is a change: it needs the token and the UI page's own
// Origin, so that a sandboxed agent (or another user) with a port cannot
// end another run.
func TestCancelNeedsTheTokenAndTheUIsOwnOrigin(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	record := filepath.Join(dir, "record.jsonl")
	recordShellRun(t, dir, state) // the store exists before the UI opens it
	s := startUI(t, state)
	exited, exit := startHangingRun(t, dir, state, record)
	_, _, list := s.get(t, "GET", "/api/runs?status=running", "Authorization", "Bearer "+s.token)
	id := firstRunID(t, list)
	cancel := "/api/runs/" + id + "/cancel"
	host := strings.TrimPrefix(s.url, "http://")
	_, port, _ := net.SplitHostPort(host)
	for name, origin := range map[string]string{
		"no Origin":                "",
		"another port":             "http://127.0.0.1:1",
		"another host":             "http://evil.example:" + port,
		"another name of loopback": "http://localhost:" + port,
		"another scheme":           "https://" + host,
		"an opaque origin":         "null",
	} {
		h := []string{"Authorization", "Bearer " + s.token}
		if origin != "" {
			h = append(h, "Origin", origin)
		}
		if code, _, body := s.get(t, "POST", cancel, h...); code != http.StatusForbidden || !strings.Contains(body, "Origin header must be "+s.url) {
			t.Errorf("POST cancel with %s: %d %s; want 403 naming the Origin it needs", name, code, body)
		}
	}
	if code, _, _ := s.get(t, "POST", cancel, "Origin", s.url); code != http.StatusUnauthorized {
		t.Errorf("POST cancel with the Origin but no token: %d, want 401", code)
	}
	// None of them reached the run: give a signal the time to land.
	time.Sleep(300 * time.Millisecond)
	select {
	case <-exited:
		t.Fatalf("the run ended after refused cancels: %v", *exit)
	default:
	}
	if hasEvent(t, record, "cancel") {
		t.Fatal("the agent got session/cancel from a refused cancel")
	}
	if _, _, body := s.get(t, "GET", "/api/runs/"+id, "Authorization", "Bearer "+s.token); !strings.Contains(body, `"status": "running"`) {
		t.Errorf("the run after refused cancels:\n%s", body)
	}
	// The page's own: the run is cancelled, as Ctrl-C does.
	if code, _, body := s.get(t, "POST", cancel, "Authorization", "Bearer "+s.token, "Origin", s.url); code != http.StatusAccepted {
		t.Fatalf("POST cancel from the page's origin: %d %s, want 202", code, body)
	}
	<-exited
	var ee *exec.ExitError
	if !errors.As(*exit, &ee) || ee.ExitCode() != 130 {
		t.Errorf("the cancelled run's acpflow exited %v, want 130", *exit)
	}
	assertAgentsGone(t, record)
}

// The what-if page takes a policy's text; a path given in its place is
// never opened, whatever it names, and no error shows a file's content.
func TestTheWhatIfPageReadsNoFileItIsNamed(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := recordAskingRun(t, dir)
	const secret = "what-if-e2e-secret-0123456789"
	creds := filepath.Join(dir, "credentials")
	os.WriteFile(creds, []byte("[default]\naws_secret_access_key = "+secret+"\n"), 0o600)
	// A file that is a policy, naming the secret as its module.
	named := filepath.Join(dir, "policy.yaml")
	os.WriteFile(named, []byte("permission:\n  wasm: "+creds+"\n# "+secret+"\n"), 0o600)
	s := startUIWith(t, []string{"ACPFLOW_E2E_ENV_SECRET=" + secret}, state)
	whatIf := func(policy string) (int, string) {
		code, _, body := s.get(t, "GET", "/whatif?"+url.Values{"runs": {"all"}, "policy": {policy}}.Encode(), "Authorization", "Bearer "+s.token)
		return code, body
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	firstLine, _, _ := strings.Cut(string(passwd), "\n")
	for _, p := range []string{"/etc/passwd", creds, named, "/proc/self/environ", "/proc/self/cmdline", "/etc/shadow", "file://" + creds, "../../../.." + creds, dir} {
		code, body := whatIf(p)
		if code != http.StatusBadRequest || !strings.Contains(body, "not a file&#39;s path") {
			t.Errorf("policy=%s: %d, want 400 saying the page takes text", p, code)
		}
		for _, leak := range []string{secret, "aws_secret_access_key", "ACPFLOW_E2E_ENV_SECRET", "PATH=", "root:", firstLine} {
			if leak != "" && strings.Contains(body, leak) {
				t.Errorf("policy=%s: the page shows %q, from a file", p, leak)
			}
		}
	}
	// The same file's text pasted: its module is refused, not loaded.
	if code, body := whatIf("permission:\n  wasm: " + creds + "\n"); code != http.StatusBadRequest || !strings.Contains(body, "cannot load a module file") || strings.Contains(body, secret) {
		t.Errorf("a policy naming a module: %d\n%s", code, body)
	}
	if code, body := whatIf("permission: allow\n#" + strings.Repeat("x", 64<<10)); code != http.StatusBadRequest || !strings.Contains(body, "64 KiB") {
		t.Errorf("a policy over 64 KiB: %d", code)
	}
	// A policy's text is decided over the recorded run.
	code, body := whatIf("permission:\n  rules:\n    - if: tool.kind == \"execute\"\n      then: reject\n  default: allow\n")
	if code != http.StatusOK || !strings.Contains(body, "1 changed") || !strings.Contains(body, "make deploy") {
		t.Errorf("a stricter policy's text: %d\n%s", code, body)
	}
}

// The token set in the environment works as --token does, and no other
// user sees it: not in the process list, not in what the UI prints.
func TestTheUITokenFromTheEnvironmentIsHonouredAndNotShown(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	recordShellRun(t, dir, state)
	const token = "env-token-0123456789abcdef"
	s := startUIWith(t, []string{"ACPFLOW_UI_TOKEN=" + token}, state)
	if s.token != "" || strings.Contains(s.out, token) {
		t.Errorf("acpflow ui printed the token it was given:\n%s", s.out)
	}
	if !strings.Contains(s.out, "$ACPFLOW_UI_TOKEN") {
		t.Errorf("acpflow ui does not say where its token comes from:\n%s", s.out)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.cmd.Process.Pid))
	if err != nil || strings.Contains(string(cmdline), token) {
		t.Errorf("the command line %q (%v) holds the token", cmdline, err)
	}
	if ps, err := exec.Command("ps", "-ww", "-o", "args=", "-p", fmt.Sprint(s.cmd.Process.Pid)).Output(); err == nil && (strings.Contains(string(ps), token) || !strings.Contains(string(ps), "acpflow")) {
		t.Errorf("ps shows %q", ps)
	}
	if code, _, _ := s.get(t, "GET", "/api/runs", "Authorization", "Bearer "+token); code != http.StatusOK {
		t.Errorf("with $ACPFLOW_UI_TOKEN as Bearer: %d", code)
	}
	if code, _, _ := s.get(t, "GET", "/api/runs"); code != http.StatusUnauthorized {
		t.Errorf("without it: %d, want 401", code)
	}
	if code, h, _ := s.get(t, "GET", "/?token="+token); code != http.StatusSeeOther || !strings.Contains(h.Get("Set-Cookie"), "HttpOnly") {
		t.Errorf("?token=: %d %q", code, h.Get("Set-Cookie"))
	}
	// --token still works.
	f := startUI(t, state, "--token", "flag-token-0123456789abcdef")
	if code, _, _ := f.get(t, "GET", "/api/runs", "Authorization", "Bearer flag-token-0123456789abcdef"); code != http.StatusOK {
		t.Errorf("with --token as Bearer: %d", code)
	}
	// A token that guards nothing, or that a URL or cookie would mangle,
	// is refused before anything is served, without being echoed.
	for _, bad := range []string{"short", "sixteen chars but spaces", "semi;colon;0123456789", strings.Repeat("x", 257)} {
		// A hang guard: one that took the token would serve until killed.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, acpflowBin, "ui", "--state", state, "--addr", "127.0.0.1:0")
		cmd.Env = append(os.Environ(), "ACPFLOW_UI_TOKEN="+bad)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "$ACPFLOW_UI_TOKEN") || strings.Contains(string(out), bad) {
			t.Errorf("ACPFLOW_UI_TOKEN=%q: %v\n%s; want exit 2 naming the variable, not its value", bad, err, out)
		}
	}
}

// --open hands the browser a page to open, never the link: a browser's
// command line is in the process list for as long as it runs.
func TestOpenKeepsTheTokenOffTheBrowsersCommandLine(t *testing.T) {
	t.Cleanup(func() { assertNoProcessFrom(t, binDir) })
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	recordShellRun(t, dir, state)
	bin, rec := filepath.Join(dir, "bin"), filepath.Join(dir, "rec")
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(rec, 0o755)
	// The browser: it records its arguments, the page's mode and content.
	os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(`#!/bin/sh
printf '%s\n' "$@" > `+rec+`/args
stat -c %a "$1" > `+rec+`/mode
cat "$1" > `+rec+`/page.tmp && mv `+rec+`/page.tmp `+rec+`/page
`), 0o755)
	s := startUIWith(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, state, "--open")
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	var page []byte
	for page == nil {
		if time.Now().After(deadline) {
			t.Fatal("acpflow ui --open never ran the browser")
		}
		page, _ = os.ReadFile(filepath.Join(rec, "page"))
		time.Sleep(10 * time.Millisecond)
	}
	args, _ := os.ReadFile(filepath.Join(rec, "args"))
	mode, _ := os.ReadFile(filepath.Join(rec, "mode"))
	if strings.Contains(string(args), s.token) || !strings.HasSuffix(strings.TrimSpace(string(args)), ".html") {
		t.Errorf("the browser's command line is %q: want a page's path, not the token", args)
	}
	if !strings.Contains(string(page), `url=`+s.link+`"`) {
		t.Errorf("the page does not go on to %s:\n%s", s.link, page)
	}
	if strings.TrimSpace(string(mode)) != "600" {
		t.Errorf("the page's mode is %s, want 600 (only its user reads it)", mode)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(strings.TrimSpace(string(args))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the page outlives acpflow ui: %v", err)
	}
}

// recordAskingRun runs, with a new store in dir, one step whose agent asks
// to run a command and to read a file, both allowed: the run the what-if
// tests judge again under other policies. It returns the store's path.
func recordAskingRun(t *testing.T, dir string) string {
	t.Helper()
	state := filepath.Join(dir, "state.db")
	wf := filepath.Join(dir, "asks.yaml")
	os.WriteFile(wf, []byte(fmt.Sprintf(`name: asks
agents:
  a: {command: %s, args: %s}
policies:
  permission: allow
steps:
  - id: s
    uses: acp-subagent
    with: {agent: a, prompt: go}
`, testAgent, agentArgs("-permission", "execute:make deploy", "-permission", "read:README.md"))), 0o644)
	if r := acpflow(t, dir, "run", wf, "--state", state); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	return state
}
