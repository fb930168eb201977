package demoagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
)

func TestSharedSessionStoreNeedsAPrivateDirectory(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    string // "" for accepted
	}{
		{"a missing directory is created and accepted", func(*testing.T, string) {}, ""},
		{"a private directory of ours is accepted", func(t *testing.T, dir string) { mkdir(t, dir, 0o700) }, ""},
		{"a directory open to others is refused", func(t *testing.T, dir string) { mkdir(t, dir, 0o755) }, "open to others"},
		{"a symbolic link to a private directory is refused", func(t *testing.T, dir string) {
			target := filepath.Join(t.TempDir(), "target")
			mkdir(t, target, 0o700)
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory"},
		{"a file in its place is refused", func(t *testing.T, dir string) {
			if err := os.WriteFile(dir, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "acpflow-demo-test")
			tt.prepare(t, dir)
			st := sessionStore{dir: dir, shared: true}
			err := st.save(savedSession{SessionID: "demo-ab12", Cwd: "/work"})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("save: %v", err)
				}
				if fi, err := os.Lstat(dir); err != nil || fi.Mode().Perm() != 0o700 || !fi.IsDir() {
					t.Errorf("directory %v (%v), want a 0700 directory", fi, err)
				}
				if _, err := st.load("demo-ab12"); err != nil {
					t.Errorf("load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), StateEnv) {
				t.Errorf("save: %v, want an error saying %q and naming %s", err, tt.want, StateEnv)
			}
			if _, err := st.load("demo-ab12"); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestValidSessionID(t *testing.T) {
	for id, want := range map[string]bool{
		"demo-0123456789abcdef":           true,
		"demo-a":                          true,
		"demo-":                           false,
		"demo-ABCDEF":                     false,
		"demo-../../x":                    false,
		"demo-ab/cd":                      false,
		"demo-ab\x00":                     false,
		"sess-0123":                       false,
		"demo-" + strings.Repeat("a", 65): false,
	} {
		if got := validSessionID(acp.SessionId(id)); got != want {
			t.Errorf("validSessionID(%q) = %v, want %v", id, got, want)
		}
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
