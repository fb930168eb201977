package policies

import (
	"path/filepath"
	"testing"
)

func TestBasename(t *testing.T) {
	tests := []struct{ name, path, want string }{
		{"a file gives its name", "/ws/src/main.go", "main.go"},
		{"a trailing slash is ignored", "/ws/src/", "src"},
		{"a relative name gives itself", "main.go", "main.go"},
		{"the root gives a slash", "/", "/"},
		{"an empty path gives an empty name", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Basename(tt.path); got != tt.want {
				t.Errorf("Basename(%q) = %q; want %q", tt.path, got, tt.want)
			}
		})
	}
}

func TestHelpersInConditions(t *testing.T) {
	root := symlinkTree(t)
	ws := filepath.Join(root, "ws")
	req := &PermissionRequest{
		Request: Request{Workspace: ws, Cwd: ws},
		Tool: Tool{
			Kind:      "edit",
			Command:   "make && rm -rf build",
			Locations: []ToolLocation{{Path: ws + "/escape/secret"}, {Path: ws + "/src/main.go"}},
		},
		Config: map[string]any{"n": 1},
	}
	tests := []struct {
		name string
		cond string
		want bool
	}{
		{"glob sees a location", `glob("**/*.go", tool.locations[1].path)`, true},
		{"under sees a symlink escape", `under(tool.locations[0].path, workspace)`, false},
		{"under sees a file inside", `under(tool.locations[1].path, workspace)`, true},
		{"all with under catches the escape", `all(tool.locations, under(.path, workspace))`, false},
		{"commands catches rm in a compound command", `any(commands(tool.command), # startsWith "rm ")`, true},
		{"a plain prefix test misses it", `tool.command startsWith "rm "`, false},
		{"basename names the file", `basename(tool.locations[1].path) == "main.go"`, true},
		{"map over locations with basename", `"secret" in map(tool.locations, basename(.path))`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog, err := CompilePermissionCondition(tt.cond)
			if err != nil {
				t.Fatal(err)
			}
			got, err := evalCondition(prog, newPermissionEnv(req, nil))
			if err != nil || got != tt.want {
				t.Errorf("%s = %t, %v; want %t", tt.cond, got, err, tt.want)
			}
		})
	}
}
