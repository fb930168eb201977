//go:build linux

package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Launcher picks the dedicated launcher only where it is installed beside
// acpflow's executable as a runnable file; anything else there (missing,
// a directory, a file without an execute bit) leaves acpflow re-executing
// itself, which enforces the same.
func TestLauncherPicksTheOneInstalledBesideAcpflow(t *testing.T) {
	self := []string{"sandbox-exec"}
	for _, c := range []struct {
		name    string
		install func(p string)
		want    bool // the dedicated launcher is picked
	}{
		{"none installed", func(string) {}, false},
		{"an executable file", func(p string) { os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755) }, true},
		{"a file without an execute bit", func(p string) { os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644) }, false},
		{"a directory", func(p string) { os.Mkdir(p, 0o755) }, false},
		{"a dangling symlink", func(p string) { os.Symlink(filepath.Join(filepath.Dir(p), "gone"), p) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			acpflow := filepath.Join(dir, "acpflow")
			c.install(filepath.Join(dir, LauncherName))
			path, args := Launcher(acpflow, self)
			if c.want && (path != filepath.Join(dir, LauncherName) || len(args) != 0) {
				t.Errorf("Launcher = %s %q, want the installed %s with no subcommand", path, args, LauncherName)
			}
			if !c.want && (path != acpflow || strings.Join(args, " ") != "sandbox-exec") {
				t.Errorf("Launcher = %s %q, want acpflow itself with its subcommand", path, args)
			}
		})
	}
}

// A launcher from another build refuses the spec rather than enforce part
// of it: a field it does not know (a rule it would skip) or another
// protocol version ends the launch before anything is confined or started.
func TestALauncherRefusesASpecFromAnotherBuild(t *testing.T) {
	dir := t.TempDir()
	good := Spec{Cwd: dir, TmpDir: dir, Home: dir, Version: specVersion}
	js := func(mutate func(m map[string]any)) string {
		b, _ := json.Marshal(good)
		var m map[string]any
		json.Unmarshal(b, &m)
		mutate(m)
		b, _ = json.Marshal(m)
		return `{"path":"/bin/true","spec":` + string(b) + `}`
	}
	for name, c := range map[string]struct {
		spec string
		want string
	}{
		"an unknown field":      {js(func(m map[string]any) { m["hide_paths"] = []string{"/secret"} }), `unknown field "hide_paths"`},
		"a newer version":       {js(func(m map[string]any) { m["version"] = specVersion + 1 }), "launcher protocol"},
		"no version":            {js(func(m map[string]any) { delete(m, "version") }), "launcher protocol"},
		"not JSON":              {"{cwd:", "reading the request"},
		"a field of wrong type": {js(func(m map[string]any) { m["deny"] = "/secret" }), "reading the request"},
		"a relative agent":      {strings.Replace(js(func(map[string]any) {}), "/bin/true", "true", 1), "not absolute"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readRequest(strings.NewReader(c.spec))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("readRequest: %v, want an error about %q", err, c.want)
			}
		})
	}
	// The same spec at this version is taken.
	if _, err := readRequest(strings.NewReader(js(func(map[string]any) {}))); err != nil {
		t.Errorf("readRequest of a good spec: %v", err)
	}
	// A launcher given arguments comes from an older build, which passed
	// the spec there.
	if _, err := launch([]string{`{"cwd":"/"}`, "/bin/true"}); err == nil || !strings.Contains(err.Error(), "different builds") {
		t.Errorf("launch with arguments: %v, want the different-builds error", err)
	}
	if _, err := launch(nil); err == nil || !strings.Contains(err.Error(), "PID namespace") {
		t.Errorf("launch outside a namespace: %v, want the PID namespace error", err)
	}
}
