// Package record is the test side of internal/testagent: it builds the
// scripted agent, reads the events it records (-record FILE), and proves
// that every process it recorded is gone. Tests of every layer (the step
// runner, the engine, the CLI) share it.
package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// Build builds the test agent to path.
func Build(path string) error {
	cmd := exec.Command("go", "build", "-o", path, "github.com/acpflow/acpflow/internal/testagent")
	cmd.Stderr = os.Stderr
	return cmd.Run()
}

// Read returns the events recorded in path, in order; nil if there is none
// (the agent never started).
func Read(path string) []map[string]any {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// Named returns the recorded events called event.
func Named(path, event string) []map[string]any {
	var out []map[string]any
	for _, r := range Read(path) {
		if r["event"] == event {
			out = append(out, r)
		}
	}
	return out
}

// PromptText is the text of a recorded prompt event.
func PromptText(r map[string]any) string {
	p, _ := r["params"].(map[string]any)
	blocks, _ := p["prompt"].([]any)
	if len(blocks) == 0 {
		return ""
	}
	b, _ := blocks[0].(map[string]any)
	s, _ := b["text"].(string)
	return s
}

// AssertGone fails t for every process the agent recorded (itself, its
// group, its grandchildren) that is still alive, and for every live process
// that carries the agent's marker (its descendants, recorded or not). An agent that ran in a PID
// namespace of its own (a sandbox; its start event's pid_ns is not the
// test's) recorded that namespace's pids, which mean other processes here:
// for it, every process still in that namespace fails t instead.
func AssertGone(t testing.TB, path string) {
	t.Helper()
	assertNoneMarked(t, path)
	own, _ := os.Readlink("/proc/self/ns/pid")
	foreign := map[string]bool{}
	for _, r := range Read(path) {
		if ns, _ := r["pid_ns"].(string); r["event"] == "start" && ns != "" && ns != own {
			foreign[ns] = true
		}
	}
	if len(foreign) > 0 {
		for _, pid := range inNamespaces(foreign) {
			t.Errorf("process %d of the agent's PID namespace is still alive", pid)
		}
	}
	for _, r := range Read(path) {
		if ns, _ := r["pid_ns"].(string); foreign[ns] {
			continue // a namespace's pids, checked above
		}
		switch r["event"] {
		case "start":
			pgid := int(r["pgid"].(float64))
			if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
				for _, pid := range members(pgid) {
					t.Errorf("process %d of the agent's group %d is still alive", pid, pgid)
				}
			}
			if alive(int(r["pid"].(float64))) {
				t.Errorf("agent process %v is still alive", r["pid"])
			}
		case "grandchild":
			if alive(int(r["pid"].(float64))) {
				t.Errorf("grandchild %v (%v) is still alive", r["pid"], r["how"])
			}
		}
	}
}

// inNamespaces lists the live (non-zombie) processes whose PID namespace
// (the link /proc/PID/ns/pid) is one of nss.
func inNamespaces(nss map[string]bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && nss[ns] && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// alive reports whether pid exists and is not dead: a zombie main thread
// whose other threads still run is alive.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return len(f) > 17 && (f[0][0] != 'Z' || string(f[17]) != "1")
}

// members lists the live (non-zombie) members of a process group.
func members(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		if len(f) > 2 && string(f[2]) == strconv.Itoa(pgid) && f[0][0] != 'Z' {
			pid, _ := strconv.Atoi(e.Name())
			out = append(out, pid)
		}
	}
	return out
}
