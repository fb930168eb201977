package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Time bounds of the -try actions: none may hold a turn up for long.
const (
	tryDialTimeout  = 2 * time.Second  // connect, and the dial to the proxy
	tryProxyTimeout = 5 * time.Second  // a whole proxy: or get: action
	tryPIDWait      = 5 * time.Second  // for the file of a pid given as @FILE
	tryShTimeout    = 10 * time.Second // a whole sh: script
)

// tryActions are the -try ACTION kinds, each a func of the rest of the action (after "KIND:").
var tryActions = map[string]func(arg string) (string, error){
	"write":   tryWrite,
	"read":    tryRead,
	"environ": tryEnviron,
	"signal":  trySignal,
	"connect": tryConnect,
	"proxy":   tryProxy,
	"get":     tryGet,
	"sh":      trySh,
}

// checkTry checks one -try ACTION's form, so that a typo fails at startup, not as an "ERR".
func checkTry(action string) error {
	kind, arg, ok := strings.Cut(action, ":")
	if _, known := tryActions[kind]; !ok || !known || arg == "" {
		return fmt.Errorf("-try %q: want KIND:ARG, KIND one of write, read, environ, signal, connect, proxy, get, sh", action)
	}
	return nil
}

// try runs one -try action and returns its output line, "try ACTION: ok[ (detail)]" or
// "try ACTION: ERR NAME (text)", NAME the errno's name when the error carries one.
func try(action string) (line string, ok bool) {
	kind, arg, _ := strings.Cut(action, ":")
	detail, err := tryActions[kind](arg)
	if err != nil {
		return fmt.Sprintf("try %s: ERR %s\n", action, errText(err)), false
	}
	if detail != "" {
		return fmt.Sprintf("try %s: ok (%s)\n", action, detail), true
	}
	return fmt.Sprintf("try %s: ok\n", action), true
}

// errText names an error: its errno ("EACCES"), then its text in parentheses; or its text alone.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name + " (" + oneLine(err.Error()) + ")"
		}
	}
	return oneLine(err.Error())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// tryWrite creates (or truncates) PATH and writes a line to it.
func tryWrite(path string) (string, error) {
	return "", os.WriteFile(path, []byte("written by testagent\n"), 0o644)
}

// trySh runs SCRIPT with /bin/sh -c in the agent's working directory, as
// an agent's shell tool would: what the agent leaves behind for whatever
// runs after it. A failure is its exit status and the tail of its stderr.
func trySh(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tryShTimeout)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tail := stderr.String()
		if len(tail) > 300 {
			tail = tail[len(tail)-300:]
		}
		return "", fmt.Errorf("%v: %s", err, tail)
	}
	return "", nil
}

// tryRead reads PATH and says how many bytes it holds (never what: it may be a planted key).
func tryRead(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes", len(b)), nil
}

// tryEnviron reads /proc/PID/environ and says how many variables it holds (never which).
func tryEnviron(pidArg string) (string, error) {
	pid, err := pidOf(pidArg)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		// The kernel answers an empty read to a reader it does not let see it.
		return "", errors.New("read nothing")
	}
	return fmt.Sprintf("%d variables", strings.Count(string(b), "\x00")), nil
}

// signals are the signals trySignal sends by name.
var signals = map[string]syscall.Signal{
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "CONT": syscall.SIGCONT,
	"HUP": syscall.SIGHUP, "TERM": syscall.SIGTERM, "0": 0,
}

// trySignal sends PID the signal SIG of PID[:SIG] (default USR1, whose default action
// terminates a process: a target that is still alive afterwards was not reached).
func trySignal(arg string) (string, error) {
	pidArg, name, hasSig := strings.Cut(arg, ":")
	sig := syscall.SIGUSR1
	if hasSig {
		s, ok := signals[strings.TrimPrefix(strings.ToUpper(name), "SIG")]
		if !ok {
			return "", fmt.Errorf("unknown signal %q", name)
		}
		sig = s
	}
	pid, err := pidOf(pidArg)
	if err != nil {
		return "", err
	}
	if pid <= 0 {
		return "", fmt.Errorf("pid %d: only a single process may be signalled", pid)
	}
	return "", syscall.Kill(pid, sig)
}

// pidOf reads a pid given as a number, or as @FILE: the number in FILE, waiting up to
// tryPIDWait for it to appear (a test learns some pids only once the process under test runs).
func pidOf(arg string) (int, error) {
	if file, ok := strings.CutPrefix(arg, "@"); ok {
		deadline := time.Now().Add(tryPIDWait)
		for {
			b, err := os.ReadFile(file)
			if err == nil && len(strings.TrimSpace(string(b))) > 0 {
				arg = strings.TrimSpace(string(b))
				break
			}
			if time.Now().After(deadline) {
				if err == nil {
					err = errors.New("empty")
				}
				return 0, fmt.Errorf("pid file %s: %w", file, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	pid, err := strconv.Atoi(arg)
	if err != nil {
		return 0, fmt.Errorf("not a pid: %q", arg)
	}
	return pid, nil
}

// tryConnect dials HOST:PORT directly over TCP.
func tryConnect(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, tryDialTimeout)
	if err != nil {
		return "", err
	}
	c.Close()
	return "", nil
}

// proxyURL is the proxy of the environment: HTTPS_PROXY, https_proxy, HTTP_PROXY or
// http_proxy, the first that is set.
func proxyURL() (*url.URL, error) {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if v := os.Getenv(k); v != "" {
			u, err := url.Parse(v)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("%s=%q: not a proxy URL", k, v)
			}
			return u, nil
		}
	}
	return nil, errors.New("no proxy in the environment (HTTPS_PROXY, HTTP_PROXY)")
}

// tryProxy opens a tunnel to HOST:PORT with CONNECT through the environment's proxy and, once
// the proxy answers 200, sends a plain HTTP GET / through it: ok when an HTTP answer comes
// back (its status line is the detail); else the proxy's status, or the dial error.
func tryProxy(addr string) (string, error) {
	pu, err := proxyURL()
	if err != nil {
		return "", err
	}
	c, err := net.DialTimeout("tcp", pu.Host, tryDialTimeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(tryProxyTimeout))
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return "", fmt.Errorf("reading the proxy's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return "", fmt.Errorf("proxy answered %s: %s", resp.Status, oneLine(string(body)))
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr); err != nil {
		return "", err
	}
	up, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", fmt.Errorf("tunnel open, but no HTTP answer through it: %w", err)
	}
	up.Body.Close()
	return "tunnel, then " + up.Status, nil
}

// tryGet GETs URL through the environment's proxy when it has one (loopback hosts too, which
// Go's default would send directly), else directly: ok on a 2xx answer.
func tryGet(rawURL string) (string, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	if pu, err := proxyURL(); err == nil {
		tr.Proxy = http.ProxyURL(pu)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: tryProxyTimeout}
	resp, err := client.Get(rawURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("status %s: %s", resp.Status, oneLine(string(body)))
	}
	return resp.Status, nil
}
