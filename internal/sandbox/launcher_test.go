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
		return string(b)
	}
	for name, c := range map[string]struct {
		spec string
		want string
	}{
		"an unknown field":      {js(func(m map[string]any) { m["hide_paths"] = []string{"/secret"} }), `unknown field "hide_paths"`},
		"a newer version":       {js(func(m map[string]any) { m["version"] = specVersion + 1 }), "launcher protocol"},
		"no version":            {js(func(m map[string]any) { delete(m, "version") }), "launcher protocol"},
		"not JSON":              {"{cwd:", "reading the spec"},
		"a field of wrong type": {js(func(m map[string]any) { m["deny"] = "/secret" }), "reading the spec"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := launch([]string{c.spec, "/bin/true"})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("launch: %v, want an error about %q", err, c.want)
			}
		})
	}
	// The same spec at this version gets past the check: the launcher
	// then fails only because the test is not PID 1 of a namespace.
	if _, err := launch([]string{js(func(map[string]any) {}), "/bin/true"}); err == nil || !strings.Contains(err.Error(), "PID namespace") {
		t.Errorf("launch of a good spec outside a namespace: %v, want the PID namespace error", err)
	}
}
