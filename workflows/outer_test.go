package workflows

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withSystemPolicy points SystemPolicyFile at path for one test.
func withSystemPolicy(t *testing.T, path string) {
	t.Helper()
	saved := SystemPolicyFile
	SystemPolicyFile = path
	t.Cleanup(func() { SystemPolicyFile = saved })
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestOuterPolicyFilesAreListedOutermostFirst(t *testing.T) {
	withSystemPolicy(t, "/etc/acpflow/policy.yaml")
	wd, _ := os.Getwd()
	for _, tc := range []struct {
		name string
		flag string
		env  map[string]string
		want []string
	}{
		{"the system's and the user's under XDG_CONFIG_HOME", "", map[string]string{"XDG_CONFIG_HOME": "/cfg", "HOME": "/home/u"},
			[]string{"the system's /etc/acpflow/policy.yaml", "the user's /cfg/acpflow/policy.yaml"}},
		{"the user's under HOME when XDG_CONFIG_HOME is not absolute", "", map[string]string{"XDG_CONFIG_HOME": "cfg", "HOME": "/home/u"},
			[]string{"the system's /etc/acpflow/policy.yaml", "the user's /home/u/.config/acpflow/policy.yaml"}},
		{"no user's file without a home", "", nil, []string{"the system's /etc/acpflow/policy.yaml"}},
		{"then $ACPFLOW_POLICY, then --policy, made absolute", "flag.yaml", map[string]string{"HOME": "/home/u", "ACPFLOW_POLICY": "/org/p.yaml"},
			[]string{"the system's /etc/acpflow/policy.yaml", "the user's /home/u/.config/acpflow/policy.yaml",
				"$ACPFLOW_POLICY /org/p.yaml named", "--policy " + filepath.Join(wd, "flag.yaml") + " named"}},
		{"a file named twice is listed once, where it comes first", "/etc/acpflow/../acpflow/policy.yaml", map[string]string{"ACPFLOW_POLICY": "/etc/acpflow/policy.yaml"},
			[]string{"the system's /etc/acpflow/policy.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := OuterPolicyFiles(tc.flag, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range files {
				s := f.From + " " + f.Path
				if f.Named {
					s += " named"
				}
				got = append(got, s)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("files\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestLoadOuterPolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	system := write("etc/policy.yaml", "permission: reject\n")
	user := write("cfg/acpflow/policy.yaml", "env: {inherit: core}\n")
	flag := write("flag.yaml", "permission: allow\nenv: {inherit: none}\n")
	vars := map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "cfg")}

	t.Run("every file that exists, outermost first, with the kinds it sets", func(t *testing.T) {
		withSystemPolicy(t, system)
		outer, err := LoadOuterPolicy(flag, env(vars))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range outer {
			got = append(got, fmt.Sprintf("%s %t %t", l.File, l.Permission != nil, l.Env != nil))
		}
		want := []string{system + " true false", user + " false true", flag + " true true"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("layers %q, want %q", got, want)
		}
	})
	t.Run("a missing system or user file is no layer", func(t *testing.T) {
		withSystemPolicy(t, filepath.Join(dir, "none", "policy.yaml"))
		outer, err := LoadOuterPolicy("", env(map[string]string{"HOME": filepath.Join(dir, "nohome")}))
		if err != nil || outer != nil {
			t.Errorf("outer %v, %v; want none", outer, err)
		}
	})
	t.Run("a missing named file is an error", func(t *testing.T) {
		withSystemPolicy(t, filepath.Join(dir, "none", "policy.yaml"))
		for _, tc := range []struct {
			flag string
			env  map[string]string
			want string
		}{
			{filepath.Join(dir, "gone.yaml"), nil, "--policy " + filepath.Join(dir, "gone.yaml") + ": no such file"},
			{"", map[string]string{"ACPFLOW_POLICY": filepath.Join(dir, "gone.yaml")}, "$ACPFLOW_POLICY " + filepath.Join(dir, "gone.yaml") + ": no such file"},
		} {
			if _, err := LoadOuterPolicy(tc.flag, env(tc.env)); err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		}
	})
	t.Run("a broken file is an error with its position, whichever it is", func(t *testing.T) {
		broken := write("broken/policy.yaml", "permission:\n  rules:\n    - {if: 'tool.kidn == \"x\"', then: allow}\n")
		withSystemPolicy(t, broken)
		_, err := LoadOuterPolicy(flag, env(nil))
		if err == nil || !strings.HasPrefix(err.Error(), "the outer policy (the system's) does not load:\n"+broken+":3:") || !strings.Contains(err.Error(), `did you mean "kind"`) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("a file that is there but cannot be read is an error, not skipped", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads any file")
		}
		locked := write("locked/policy.yaml", "permission: reject\n")
		os.Chmod(locked, 0)
		withSystemPolicy(t, locked)
		if _, err := LoadOuterPolicy("", env(nil)); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("a directory in its place is an error", func(t *testing.T) {
		os.MkdirAll(filepath.Join(dir, "isdir", "policy.yaml"), 0o755)
		withSystemPolicy(t, filepath.Join(dir, "isdir", "policy.yaml"))
		if _, err := LoadOuterPolicy("", env(nil)); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("a wasm path is relative to the file", func(t *testing.T) {
		withSystemPolicy(t, filepath.Join(dir, "none", "policy.yaml"))
		p := write("mod/policy.yaml", "permission: {wasm: perm.wasm}\n")
		_, err := LoadOuterPolicy(p, env(nil))
		// This package links no WASM loader; the error names the file it would load.
		if err == nil || !strings.Contains(err.Error(), p+":1:") {
			t.Errorf("error %v", err)
		}
	})
}
