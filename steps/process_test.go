package steps

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveCwdIsOneRuleForEveryProcessKind: with.cwd wins over the
// kind's fallback (an agent's cwd), which wins over the workspace;
// relative ones are the workspace's; a missing, plain-file or
// non-enterable one fails before anything is spawned, naming the path.
func TestResolveCwdIsOneRuleForEveryProcessKind(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"sub", "agent", "shut"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "shut"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, with, fallback, want, wantErr string }{
		{"the workspace by default", "", "", ws, ""},
		{"the fallback", "", "agent", filepath.Join(ws, "agent"), ""},
		{"with.cwd over the fallback", "sub", "agent", filepath.Join(ws, "sub"), ""},
		{"an absolute with.cwd", filepath.Join(ws, "sub"), "", filepath.Join(ws, "sub"), ""},
		{"a missing one", "nope", "", "", "cwd " + filepath.Join(ws, "nope") + " does not exist"},
		{"a file", "file", "", "", "cwd " + filepath.Join(ws, "file") + " is not a directory"},
		{"one that cannot be entered", "shut", "", "", "cwd " + filepath.Join(ws, "shut") + " cannot be entered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "one that cannot be entered" && os.Geteuid() == 0 {
				t.Skip("root enters every directory")
			}
			inv := &Invocation{Workspace: ws, With: map[string]any{}}
			if tt.with != "" {
				inv.With["cwd"] = tt.with
			}
			got, err := ResolveCwd(inv, tt.fallback)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error = %v; want %q", err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || got != tt.want):
				t.Errorf("ResolveCwd = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
