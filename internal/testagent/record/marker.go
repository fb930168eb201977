package record

import (
	"bytes"
	"os"
	"strconv"
	"testing"
)

// markerVar is procgroup.MarkerVar: acpflow starts every agent with it, and
// everything the agent starts inherits it unless it replaces its
// environment. Written out here so that the tests of procgroup itself can
// use this package.
const markerVar = "ACPFLOW_AGENT"

// assertNoneMarked fails t for every live process that carries the marker
// of an agent recorded in path (from the agent's start event): whatever the
// agent started, recorded or not (a shell's forks, a daemon that changed its
// pid), is gone only when no process carries it.
func assertNoneMarked(t testing.TB, path string) {
	t.Helper()
	markers := map[string]bool{}
	for _, r := range Read(path) {
		if r["event"] != "start" {
			continue
		}
		env, _ := r["env"].(map[string]any)
		if m, _ := env[markerVar].(string); m != "" {
			markers[m] = true
		}
	}
	for _, pid := range Marked(markers) {
		t.Errorf("process %d, started by the agent (it carries its %s), is still alive", pid, markerVar)
	}
}

// Marked lists the live (non-zombie) processes whose initial environment
// holds MARKER_VAR=m for one of markers (the test process itself aside).
func Marked(markers map[string]bool) []int {
	if len(markers) == 0 {
		return nil
	}
	ents, _ := os.ReadDir("/proc")
	me := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(markerVar+"=")); ok && markers[string(v)] && alive(pid) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
