package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sample is one measured process.
type sample struct {
	begin time.Time
	wall  time.Duration
	// cpu is user + system time of the process and of every descendant it
	// reaped before exiting (wait4's rusage): the client plus its agent.
	cpu time.Duration
	// maxRSS (KiB) is the largest peak RSS among the process and the
	// descendants it reaped: a maximum, not a sum. Its floor is the
	// launcher's RSS (launch.go).
	maxRSS int64
	stdout []byte // only when the command asked to capture it
}

// command is one process to measure.
type command struct {
	argv    []string
	env     []string // nil: the bench's own environment
	dir     string
	capture bool // keep stdout (for --json events)
}

func (c command) measure() (sample, error) {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env, cmd.Dir = c.env, c.dir
	var stdout bytes.Buffer
	if c.capture {
		cmd.Stdout = &stdout
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	s, err := launched(cmd)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %v\n%s", strings.Join(c.argv, " "), err, tail(stderr.String(), 10))
	}
	s.stdout = stdout.Bytes()
	return s, nil
}

// mustMeasure is measure for the commands that are acpflow's own: they may
// not fail.
func (c command) mustMeasure() sample {
	s, err := c.measure()
	check(err)
	return s
}

func cpuOf(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

func rssOf(ps *os.ProcessState) int64 { return ps.SysUsage().(*syscall.Rusage).Maxrss }

// agentAlone drives the no-delay agent over a pipe with no client at all:
// the three requests of a turn written at once, read until the prompt's
// answer, stdin closed, wait. It is the floor under every client, and it
// shows how much of their CPU and RSS figures is the agent's.
func agentAlone(agent, dir string) sample {
	cmd := exec.Command(agent, "-session-id", "bench")
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	check(err)
	stdout, err := cmd.StdoutPipe()
	check(err)
	cwd, _ := json.Marshal(dir)
	requests := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}
{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":` + string(cwd) + `,"mcpServers":[]}}
{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"bench","prompt":[{"type":"text","text":"hello"}]}}
`
	begin := time.Now()
	check(cmd.Start())
	_, err = io.WriteString(stdin, requests)
	check(err)
	sc := bufio.NewScanner(stdout)
	answered := false
	for !answered && sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		answered = json.Unmarshal(sc.Bytes(), &m) == nil && m.Method == "" && string(m.ID) == "3"
	}
	// The agent's own peak, read before it exits: its rusage would start
	// from the bench's RSS (see launch.go).
	hwm := vmHWM(cmd.Process.Pid)
	stdin.Close()
	io.Copy(io.Discard, stdout)
	check(cmd.Wait())
	if !answered {
		check(fmt.Errorf("%s: the prompt was never answered", agent))
	}
	return sample{begin: begin, wall: time.Since(begin), cpu: cpuOf(cmd.ProcessState), maxRSS: hwm}
}

// vmHWM is a live process's peak RSS in KiB, from /proc/PID/status.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// median and maximum of one figure over samples.
func median(ss []sample, f func(sample) float64) float64 {
	v := values(ss, f)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func maximum(ss []sample, f func(sample) float64) float64 {
	v := values(ss, f)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)-1]
}

func values(ss []sample, f func(sample) float64) []float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	sort.Float64s(v)
	return v
}

func wallOf(s sample) float64 { return float64(s.wall) }
func cpuMs(s sample) float64  { return float64(s.cpu) }
func rssKiB(s sample) float64 { return float64(s.maxRSS) }

func ms(ns float64) string  { return fmt.Sprintf("%.1f ms", ns/1e6) }
func mb(kib float64) string { return fmt.Sprintf("%.1f MB", kib/1024) }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
