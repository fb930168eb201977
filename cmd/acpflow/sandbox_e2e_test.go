package main

// End to end: the sandbox (issue 22), through the real binary on workflow
// files, against the test agent, which tries on request (-try) what a
// confined agent must not do: write outside its workspace, read a planted
// ~/.ssh key, read acpflow's and another process's environment, signal
// them, connect directly to a local port, and reach a listed and an
// unlisted host through the step's proxy. Every forbidden try must fail
// with an error the agent sees, every allowed one must work, nothing may be
// left running, and the step's result must say what was enforced.
//
// Loopback only: the test's own listener and HTTP server stand for "the
// network".

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acpflow/acpflow/internal/sandbox"
	agentrecord "github.com/acpflow/acpflow/internal/testagent/record"
)

// sandboxWorld is what one test sets up around acpflow: a workspace (the
// step's cwd), a home for the agent with a planted key, a directory
// outside both, a direct-connect listener, an HTTP server the proxy may
// lead to, and a process outside the step with a secret in its
// environment.
type sandboxWorld struct {
	ws, home, outside string
	key               string // HOME/.ssh/id_rsa
	outsideFile       string // a readable file outside the workspace
	listener          net.Listener
	listed, unlisted  *httptest.Server // both loopback; only listed goes in a network list
	sleeper           *exec.Cmd
	mark              string   // E2E_SANDBOX_MARK, in the agent's environment
	acpflow           string   // the binary run runs: acpflowBin unless a test installs another
	env               []string // acpflow's environment over the test's (NAME=VALUE)
	agent             string   // the agent's command: testAgent unless a test names another
	agentEnv          []string // the agent's env: besides HOME and the mark (NAME=VALUE)
	policies          string   // the workflow's policies: block, "" for none
}

const plantedKey = "-----BEGIN OPENSSH PRIVATE KEY-----\nE2E-PLANTED-KEY\n-----END OPENSSH PRIVATE KEY-----\n"

func newSandboxWorld(t *testing.T) *sandboxWorld {
	t.Helper()
	if r := sandbox.Probe(); !r.FS || !r.Net || !r.Scopes || !r.UserNS || !r.PIDNS || !r.NetNS {
		t.Skipf("this kernel cannot enforce a sandbox: %+v", r)
	}
	w := &sandboxWorld{ws: t.TempDir(), home: t.TempDir(), outside: t.TempDir(), mark: randomMark(), acpflow: acpflowBin, agent: testAgent}
	w.key = writeFile(t, w.home, ".ssh/id_rsa", plantedKey)
	os.Chmod(filepath.Dir(w.key), 0o700)
	w.outsideFile = writeFile(t, w.outside, "notes.txt", "readable from anywhere\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.listener = ln
	go func() { // accept and close: a connect is all that is tried
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	w.listed = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "listed\n") }))
	w.unlisted = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { io.WriteString(rw, "unlisted\n") }))
	t.Cleanup(w.listed.Close)
	t.Cleanup(w.unlisted.Close)
	// A process outside the step, as a user's other programs are: its
	// environment holds a secret, and SIGUSR1 would end it.
	w.sleeper = exec.Command("/bin/sleep", "300")
	w.sleeper.Env = []string{"E2E_SLEEPER_SECRET=" + randomMark()}
	if err := w.sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.sleeper.Process.Kill()
		w.sleeper.Wait()
	})
	return w
}

func randomMark() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (w *sandboxWorld) sleeperPID() string { return strconv.Itoa(w.sleeper.Process.Pid) }
func (w *sandboxWorld) direct() string     { return w.listener.Addr().String() }
func (w *sandboxWorld) listedAddr() string { return w.listed.Listener.Addr().String() }
func (w *sandboxWorld) unlistedAddr() string {
	return w.unlisted.Listener.Addr().String()
}

// sleeperAlive says whether the sleeper still runs (SIGUSR1 would have
// ended it).
func (w *sandboxWorld) sleeperAlive() bool {
	b, err := os.ReadFile("/proc/" + w.sleeperPID() + "/stat")
	return err == nil && procState(b) != 'Z'
}

func procState(stat []byte) byte {
	return bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])[0][0]
}

// sandboxRun is one acpflow run of a one-step workflow on the test agent.
type sandboxRun struct {
	r       result
	pid     int    // acpflow's
	state   string // the run store, for show
	out     string // the result file
	step    map[string]any
	record  string
	outcome map[string]string // -try ACTION → what followed "try ACTION: "
	// ownPIDNS: the agent ran in a PID namespace of its own.
	ownPIDNS bool
}

// acpflowPIDFile is where, in the workspace, the test writes acpflow's pid
// once it runs; the agent's tries name it as @FILE.
const acpflowPIDFile = "acpflow.pid"

// run runs `acpflow run` on a workflow whose agent a has agentKeys (YAML
// lines, e.g. "sandbox: true") and tries the actions (one starting with
// "-" is a test agent flag instead), with extra arguments to run. The agent's HOME is w.home and its environment holds
// w.mark. acpflow runs in w.ws with a secret of its own in its
// environment, and its pid is written to w.ws/acpflow.pid as soon as it
// starts.
func (w *sandboxWorld) run(t *testing.T, agentKeys string, runArgs []string, tries ...string) sandboxRun {
	t.Helper()
	dir := t.TempDir() // the workflow, the record, the result, the store: outside the workspace
	record := filepath.Join(w.ws, fmt.Sprintf("record-%s.jsonl", randomMark()))
	args := []string{"-record", record, "-no-chunks", "-lifetime", "2m"}
	for _, a := range tries {
		if strings.HasPrefix(a, "-") { // an agent flag of its own
			args = append(args, a)
			continue
		}
		args = append(args, "-try", a)
	}
	env := fmt.Sprintf("HOME: %q, E2E_SANDBOX_MARK: %q", w.home, w.mark)
	for _, kv := range w.agentEnv {
		k, v, _ := strings.Cut(kv, "=")
		env += fmt.Sprintf(", %s: %q", k, v)
	}
	body := fmt.Sprintf("name: sandbox\nagents:\n  a:\n    command: %s\n    args: %s\n    env: {%s}\n%s\nsteps:\n  - id: s\n    uses: acp-subagent\n    with: {agent: a, prompt: go}\n",
		w.agent, agentArgs(args...), env, prefixLines(agentKeys, "    "))
	if w.policies != "" {
		body += "policies:\n" + prefixLines(w.policies, "  ") + "\n"
	}
	wf := writeWorkflow(t, dir, body)
	out := filepath.Join(dir, "out.jsonl")
	os.Remove(filepath.Join(w.ws, acpflowPIDFile))

	t.Cleanup(func() { assertNoProcessFrom(t, binDir); assertNoProcessFrom(t, filepath.Dir(w.acpflow)) })
	cmd := exec.Command(w.acpflow, append([]string{"run", wf, "--workspace", w.ws, "--output", out, "--state", filepath.Join(dir, "state.db")}, runArgs...)...)
	cmd.Dir = w.ws
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "E2E_ACPFLOW_SECRET="+randomMark()), w.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Written by rename, so that the agent never reads half a number.
	tmp := filepath.Join(w.ws, acpflowPIDFile+".tmp")
	os.WriteFile(tmp, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
	os.Rename(tmp, filepath.Join(w.ws, acpflowPIDFile))
	guard := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	guard.Stop()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	res := sandboxRun{r: result{code, stdout.String(), stderr.String()}, pid: cmd.Process.Pid, record: record, outcome: map[string]string{},
		state: filepath.Join(dir, "state.db"), out: out}
	if b, err := os.ReadFile(out); err == nil {
		var run struct {
			Steps map[string]map[string]any `json:"steps"`
		}
		if err := json.Unmarshal(b, &run); err != nil {
			t.Fatalf("result %q: %v", b, err)
		}
		res.step = run.Steps["s"]
	}
	output, _ := res.step["output"].(string)
	t.Logf("acpflow exit %d; the agent's output:\n%s", code, output)
	for _, line := range strings.Split(output, "\n") {
		rest, ok := strings.CutPrefix(line, "try ")
		if !ok {
			continue
		}
		for _, a := range tries {
			if o, ok := strings.CutPrefix(rest, a+": "); ok {
				res.outcome[a] = o
			}
		}
	}
	// Nothing left running: the agent and whatever it recorded (in its
	// PID namespace, when sandboxed), and no process with its marker.
	if _, err := os.Stat(record); err == nil {
		assertAgentsGone(t, record)
		for _, start := range agentrecord.Named(record, "start") {
			// The marker check below is only worth something if the
			// agent carried it.
			if env, _ := start["env"].(map[string]any); env["E2E_SANDBOX_MARK"] != w.mark {
				t.Errorf("the agent's environment lacks the marker: %v", env)
			}
			own, _ := os.Readlink("/proc/self/ns/pid")
			res.ownPIDNS = start["pid_ns"] != own
		}
	}
	assertNoProcessMarked(t, "E2E_SANDBOX_MARK="+w.mark)
	return res
}

// assertNoProcessMarked fails t for every live process whose environment
// holds mark.
func assertNoProcessMarked(t *testing.T, mark string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), mark) {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && procState(b) != 'Z' {
			t.Errorf("process %s carries the test's marker and is still running", e.Name())
		}
	}
}

// want checks the outcome of each action against the start of what the
// agent said: "ok…" (it worked) or "ERR NAME…" (it failed, with the error
// the agent got); "A|B" accepts either.
func (s sandboxRun) want(t *testing.T, expect map[string]string) {
	t.Helper()
	for action, want := range expect {
		got, ok := s.outcome[action]
		switch {
		case !ok:
			t.Errorf("try %s: no outcome in the output:\n%v\nstderr:\n%s", action, s.step["output"], s.r.stderr)
		case !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool { return strings.HasPrefix(got, w) }):
			t.Errorf("try %s: %s; want %s", action, got, want)
		}
	}
}

// sandboxRecord is the step's `sandbox` record.
func (s sandboxRun) sandboxRecord(t *testing.T) map[string]any {
	t.Helper()
	rec, _ := s.step["sandbox"].(map[string]any)
	if rec == nil {
		t.Fatalf("the step's result has no sandbox record: %v\nstderr:\n%s", s.step, s.r.stderr)
	}
	return rec
}

func strList(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// checkEnforced checks what a record says every sandbox enforced.
func (s sandboxRun) checkEnforced(t *testing.T, w *sandboxWorld, network string) map[string]any {
	t.Helper()
	rec := s.sandboxRecord(t)
	if rec["enforced"] != true {
		t.Errorf("sandbox.enforced = %v, want true", rec["enforced"])
	}
	if abi, _ := rec["landlock_abi"].(float64); int(abi) != sandbox.Probe().LandlockABI || abi < 1 {
		t.Errorf("sandbox.landlock_abi = %v, want the kernel's %d", rec["landlock_abi"], sandbox.Probe().LandlockABI)
	}
	if rec["network"] != network {
		t.Errorf("sandbox.network = %v, want %s", rec["network"], network)
	}
	if write := strList(rec["write"]); !slices.Contains(write, w.ws) {
		t.Errorf("sandbox.write = %v; want the workspace %s in it", write, w.ws)
	}
	if deny := strList(rec["deny"]); !slices.Contains(deny, filepath.Join(w.home, ".ssh")) {
		t.Errorf("sandbox.deny = %v; want %s in it", deny, filepath.Join(w.home, ".ssh"))
	}
	if _, ok := rec["warning"]; ok {
		t.Errorf("sandbox.warning = %v on an enforced sandbox", rec["warning"])
	}
	if !s.ownPIDNS {
		t.Error("the sandboxed agent ran in acpflow's PID namespace")
	}
	return rec
}

func (s sandboxRun) mustSucceed(t *testing.T) {
	t.Helper()
	if s.r.code != 0 || s.step["status"] != "succeeded" {
		t.Fatalf("exit %d, step %v; want 0 and succeeded\nerror: %v\nstderr:\n%s", s.r.code, s.step["status"], s.step["error"], s.r.stderr)
	}
}

// The same tries without a sandbox all work: the forbidden ones below fail
// because of the sandbox, not because the test cannot do them.
func TestWithoutASandboxTheAgentCanDoItAll(t *testing.T) {
	w := newSandboxWorld(t)
	tries := []string{
		"write:" + filepath.Join(w.outside, "escaped.txt"),
		"read:" + w.key,
		"environ:@" + filepath.Join(w.ws, acpflowPIDFile),
		"environ:" + w.sleeperPID(),
		"signal:" + w.sleeperPID() + ":CONT", // harmless: the sleeper is needed below
		"connect:" + w.direct(),
	}
	s := w.run(t, "", nil, tries...)
	s.mustSucceed(t)
	expect := map[string]string{}
	for _, a := range tries {
		expect[a] = "ok"
	}
	s.want(t, expect)
	if _, ok := s.step["sandbox"]; ok {
		t.Errorf("an unsandboxed step has a sandbox record: %v", s.step["sandbox"])
	}
	if s.ownPIDNS {
		t.Error("the unsandboxed agent ran in a PID namespace of its own")
	}
	if b, _ := os.ReadFile(filepath.Join(w.outside, "escaped.txt")); len(b) == 0 {
		t.Error("the unsandboxed write outside the workspace left no file")
	}
}

func TestASandboxedAgentIsConfinedByTheKernel(t *testing.T) {
	w := newSandboxWorld(t)
	pidFile := "@" + filepath.Join(w.ws, acpflowPIDFile)

	t.Run("sandbox: true confines files and processes, not the network", func(t *testing.T) {
		inside := filepath.Join(w.ws, "inside.txt")
		escaped := filepath.Join(w.outside, "escaped.txt")
		expect := map[string]string{
			"write:" + inside:                           "ok",
			"write:" + escaped:                          "ERR EACCES",
			"write:" + filepath.Join(w.home, "dropped"): "ERR EACCES",
			"read:" + w.key:                             "ERR EACCES",
			"read:" + w.outsideFile:                     "ok",
			// acpflow and the sleeper are outside the agent's PID
			// namespace: there is no /proc entry to read and no such
			// process to signal (ENOENT, ESRCH). Were they visible,
			// Landlock's scopes and ptrace rules would answer EPERM or
			// EACCES.
			"environ:" + pidFile:        "ERR ENOENT|ERR EACCES|ERR EPERM",
			"environ:" + w.sleeperPID(): "ERR ENOENT|ERR EACCES|ERR EPERM",
			"signal:" + pidFile:         "ERR ESRCH|ERR EPERM",
			"signal:" + w.sleeperPID():  "ERR ESRCH|ERR EPERM",
			"connect:" + w.direct():     "ok",
		}
		s := w.run(t, "sandbox: true", nil, keys(expect)...)
		s.mustSucceed(t)
		s.want(t, expect)
		s.checkEnforced(t, w, "on")
		if b, err := os.ReadFile(inside); err != nil || len(b) == 0 {
			t.Errorf("the write inside the workspace: %q, %v", b, err)
		}
		if _, err := os.Stat(escaped); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the write outside the workspace left %s (%v)", escaped, err)
		}
		if !w.sleeperAlive() {
			t.Error("the process outside the step died: the agent's SIGUSR1 reached it")
		}
		// acpflow itself got no SIGUSR1 either: it would have died of it
		// (mustSucceed above).
	})

	t.Run("what a sandboxed agent leaves running dies with it", func(t *testing.T) {
		s := w.run(t, "sandbox: true", nil, "-grandchild", "-setsid-grandchild", "-daemon-grandchild", "-trap-term",
			"write:"+filepath.Join(w.ws, "daemons.txt"))
		s.mustSucceed(t)
		if n := len(agentrecord.Named(s.record, "grandchild")); n != 3 {
			t.Errorf("the agent recorded %d grandchildren, want 3", n)
		}
		s.checkEnforced(t, w, "on")
		// run has checked that none is left (in the agent's PID
		// namespace, and by the marker).
	})

	t.Run("network: off keeps the agent off the host's network", func(t *testing.T) {
		expect := map[string]string{
			"connect:" + w.direct():     "ERR ECONNREFUSED", // its own loopback, where nothing listens
			"connect:" + w.listedAddr(): "ERR ECONNREFUSED",
			"read:" + w.key:             "ERR EACCES",
		}
		s := w.run(t, "sandbox: {network: off}", nil, keys(expect)...)
		s.mustSucceed(t)
		s.want(t, expect)
		s.checkEnforced(t, w, "off")
	})

	t.Run("a network list lets through its proxy only the listed hosts", func(t *testing.T) {
		expect := map[string]string{
			"connect:" + w.direct():                   "ERR EACCES", // Landlock: only the proxy's port
			"connect:" + w.listedAddr():               "ERR EACCES", // listed, but not directly
			"proxy:" + w.listedAddr():                 "ok (tunnel, then 200 OK)",
			"get:http://" + w.listedAddr() + "/":      "ok (200 OK)",
			"proxy:" + w.unlistedAddr():               "ERR proxy answered 403",
			"get:http://" + w.unlistedAddr() + "/x?k": "ERR status 403",
			"proxy:" + w.direct():                     "ERR proxy answered 403",
		}
		s := w.run(t, fmt.Sprintf("sandbox:\n  network: [%q]", w.listedAddr()), nil, keys(expect)...)
		s.mustSucceed(t)
		s.want(t, expect)
		rec := s.checkEnforced(t, w, "list")
		if allow := strList(rec["allow"]); !slices.Equal(allow, []string{w.listedAddr()}) {
			t.Errorf("sandbox.allow = %v, want [%s]", allow, w.listedAddr())
		}
		refused := strList(rec["refused"])
		for _, host := range []string{w.unlistedAddr(), w.direct()} {
			if !slices.Contains(refused, host) {
				t.Errorf("sandbox.refused = %v; want %s in it", refused, host)
			}
		}
		if slices.Contains(refused, w.listedAddr()) {
			t.Errorf("sandbox.refused = %v holds the listed host", refused)
		}
	})

	t.Run("write: and deny: move the lines", func(t *testing.T) {
		extra := t.TempDir()
		denied := writeFile(t, w.outside, "private/secret.txt", "secret\n")
		expect := map[string]string{
			"write:" + filepath.Join(extra, "ok.txt"): "ok",
			"read:" + denied:        "ERR EACCES",
			"read:" + w.outsideFile: "ok",
		}
		s := w.run(t, fmt.Sprintf("sandbox: {write: [%q], deny: [%q]}", extra, filepath.Dir(denied)), nil, keys(expect)...)
		s.mustSucceed(t)
		s.want(t, expect)
		rec := s.checkEnforced(t, w, "on")
		if !slices.Contains(strList(rec["write"]), extra) || !slices.Contains(strList(rec["deny"]), filepath.Dir(denied)) {
			t.Errorf("sandbox record %v; want %s writable and %s denied", rec, extra, filepath.Dir(denied))
		}
	})
}

func TestASandboxThatCannotBeValidatedFailsTheRun(t *testing.T) {
	w := newSandboxWorld(t)
	for _, bad := range []string{
		`sandbox: {network: ["http://127.0.0.1:1/"]}`,
		`sandbox: {network: ["127.0.0.1:99999"]}`,
		`sandbox: {network: sometimes}`,
		`sandbox: {writable: [x]}`,
	} {
		s := w.run(t, bad, nil, "write:"+filepath.Join(w.ws, "never.txt"))
		if s.r.code != 2 || !strings.Contains(s.r.stderr, "sandbox") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and the error about the sandbox", bad, s.r.code, s.r.stderr)
		}
		if _, err := os.Stat(s.record); err == nil {
			t.Errorf("%s: the agent was started", bad)
		}
	}
}

func TestRunSandboxAndAnOuterPolicyFileSandboxEveryAgent(t *testing.T) {
	w := newSandboxWorld(t)
	tries := map[string]string{
		"read:" + w.key: "ERR EACCES",
		"write:" + filepath.Join(w.outside, "escaped.txt"): "ERR EACCES",
		"write:" + filepath.Join(w.ws, "inside.txt"):       "ok",
		"connect:" + w.direct():                            "ok",
	}
	policy := writeFile(t, t.TempDir(), "policy.yaml", "sandbox: required\n")

	t.Run("run --sandbox", func(t *testing.T) {
		s := w.run(t, "", []string{"--sandbox"}, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		s.checkEnforced(t, w, "on")
	})
	t.Run("run --sandbox keeps an agent's own sandbox", func(t *testing.T) {
		s := w.run(t, "sandbox: {network: off}", []string{"--sandbox"}, "connect:"+w.direct())
		s.mustSucceed(t)
		s.want(t, map[string]string{"connect:" + w.direct(): "ERR ECONNREFUSED"})
		s.checkEnforced(t, w, "off")
	})
	t.Run("an outer policy file with sandbox: required", func(t *testing.T) {
		s := w.run(t, "", []string{"--policy", policy}, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		s.checkEnforced(t, w, "on")
	})
	t.Run("sandbox: false under the outer file still runs sandboxed", func(t *testing.T) {
		s := w.run(t, "sandbox: false", []string{"--policy", policy}, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		s.checkEnforced(t, w, "on")
	})
	t.Run("required: false under the outer file is required", func(t *testing.T) {
		s := w.run(t, "sandbox: {required: false, network: off}", []string{"--policy", policy}, "connect:"+w.direct())
		s.mustSucceed(t)
		s.want(t, map[string]string{"connect:" + w.direct(): "ERR ECONNREFUSED"})
		s.checkEnforced(t, w, "off")
	})
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// A reused agent keeps its sandbox: the pool's key holds it, so a
// confined process serves the next step that asks for the same sandbox,
// and never one that asks for none.
func TestAReusedAgentKeepsItsSandbox(t *testing.T) {
	if err := sandbox.Probe().Problems; len(err) > 0 {
		t.Skipf("this kernel cannot enforce a sandbox: %v", err)
	}
	dir := t.TempDir()
	record := filepath.Join(dir, "record.jsonl")
	args := agentArgs("-record", record)
	wf := writeWorkflow(t, dir, fmt.Sprintf(`name: reuse
agents:
  boxed: {command: %s, args: %s, reuse: true, sandbox: {network: off}}
  open: {command: %s, args: %s, reuse: true}
steps:
  - {id: one, uses: acp-subagent, with: {agent: boxed, prompt: a}}
  - {id: two, needs: [one], uses: acp-subagent, with: {agent: boxed, prompt: b}}
  - {id: three, needs: [two], uses: acp-subagent, with: {agent: open, prompt: c}}
`, testAgent, args, testAgent, args))
	out := filepath.Join(dir, "out.jsonl")
	// The store outside the workspace: every sandbox denies it, and a
	// denied file in the agents' cwd would keep them from making new
	// files beside it (docs/sandbox.md).
	r := acpflow(t, dir, "run", wf, "--json", "--output", out, "--state", filepath.Join(t.TempDir(), "state.db"))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	assertAgentsGone(t, record)
	var res struct {
		Steps map[string]struct {
			Sandbox *struct {
				Enforced bool   `json:"enforced"`
				Network  string `json:"network"`
			} `json:"sandbox"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(readFile(t, out)), &res); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"one", "two"} {
		if sb := res.Steps[id].Sandbox; sb == nil || !sb.Enforced || sb.Network != "off" {
			t.Errorf("step %s: sandbox %+v, want enforced with network off", id, sb)
		}
	}
	if sb := res.Steps["three"].Sandbox; sb != nil {
		t.Errorf("step three asked for no sandbox, got %+v: a confined process served it", sb)
	}
	reused := map[string]bool{}
	for _, line := range strings.Split(r.stdout, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil && e["kind"] == "reused" {
			reused[fmt.Sprint(e["step"])] = true
		}
	}
	if !reused["two"] || reused["three"] {
		t.Errorf("reused: %v; want step two on one's confined process, three on a process of its own", reused)
	}
}

// The launcher a sandboxed agent starts through is the dedicated one
// installed beside acpflow (as `go install ./cmd/...` puts them), and
// acpflow re-executes itself where there is none: either way the agent is
// confined alike. Covers where the launcher comes from: beside the
// executable, missing, and not runnable (a file without an execute bit).
func TestTheLauncherBesideAcpflowOrAcpflowItselfConfinesTheAgent(t *testing.T) {
	w := newSandboxWorld(t)
	tries := map[string]string{
		"read:" + w.key: "ERR EACCES",
		"write:" + filepath.Join(w.outside, "escaped.txt"): "ERR EACCES",
		"write:" + filepath.Join(w.ws, "inside.txt"):       "ok",
	}
	// install puts acpflow in a directory of its own, with launcher (a
	// script body, "" for none) beside it; it returns the directory.
	install := func(t *testing.T, launcher string, mode os.FileMode) string {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		if err := os.Link(acpflowBin, filepath.Join(dir, "acpflow")); err != nil {
			t.Skipf("cannot link acpflow into a directory of its own: %v", err)
		}
		if launcher != "" {
			writeFile(t, dir, sandbox.LauncherName, launcher)
			os.Chmod(filepath.Join(dir, sandbox.LauncherName), mode)
		}
		return dir
	}
	used := func(t *testing.T, marker string) int {
		b, _ := os.ReadFile(marker)
		return strings.Count(string(b), "launched\n")
	}
	// A launcher that says it ran, then is the real one (built beside
	// acpflowBin by TestMain).
	wrapper := func(marker string) string {
		return fmt.Sprintf("#!/bin/sh\necho launched >> %s\nexec %s \"$@\"\n", marker, filepath.Join(binDir, sandbox.LauncherName))
	}

	t.Run("the launcher installed beside acpflow", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "launched")
		w.acpflow = filepath.Join(install(t, wrapper(marker), 0o755), "acpflow")
		s := w.run(t, "sandbox: true", nil, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		s.checkEnforced(t, w, "on")
		// Once for the agent; a second time if the launcher started ahead
		// for a next sandboxed step was started before the run ended.
		if n := used(t, marker); n != 1 && n != 2 {
			t.Errorf("the launcher beside acpflow ran %d times, want once (and once ahead)", n)
		}
	})
	t.Run("none installed: acpflow re-executes itself", func(t *testing.T) {
		w.acpflow = filepath.Join(install(t, "", 0), "acpflow")
		s := w.run(t, "sandbox: true", nil, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		s.checkEnforced(t, w, "on")
	})
	t.Run("one that is not executable is not used", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "launched")
		w.acpflow = filepath.Join(install(t, wrapper(marker), 0o644), "acpflow")
		s := w.run(t, "sandbox: true", nil, keys(tries)...)
		s.mustSucceed(t)
		s.want(t, tries)
		s.checkEnforced(t, w, "on")
		if n := used(t, marker); n != 0 {
			t.Errorf("a launcher without an execute bit ran %d times", n)
		}
	})
}

// probe --sandbox says what this kernel enforces, as the step's sandbox
// will find it, and starts nothing.
func TestProbeSandboxSaysWhatTheKernelEnforces(t *testing.T) {
	dir := t.TempDir()
	r := acpflow(t, dir, "probe", "--sandbox")
	var rep sandbox.Report
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("exit %d, output %q", r.code, r.stdout)
	}
	if want := sandbox.Probe(); rep.LandlockABI != want.LandlockABI || rep.PIDNS != want.PIDNS || rep.NetNS != want.NetNS {
		t.Errorf("probe --sandbox = %+v, want %+v", rep, want)
	}
	if r := acpflow(t, dir, "probe", "--sandbox", "--", testAgent); r.code != 2 {
		t.Errorf("probe --sandbox with an agent: exit %d, want 2 (bad usage)", r.code)
	}
}
