package policies

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		path    string
		want    bool
	}{
		{"a literal pattern matches itself only", "src/main.go", "src/main.go", true},
		{"a literal pattern is anchored at the end", "src/main", "src/main.go", false},
		{"a literal pattern is anchored at the start", "main.go", "src/main.go", false},
		{"star matches a run within one element", "src/*.go", "src/main.go", true},
		{"star matches an empty run", "src/*.go", "src/.go", true},
		{"star does not cross a slash", "src/*.go", "src/a/main.go", false},
		{"star alone does not match a path with a slash", "*", "a/b", false},
		{"two stars cross slashes", "src/**", "src/a/b/c.go", true},
		{"two stars match an absolute path", "/home/**/.ssh/*", "/home/u/.ssh/id_ed25519", true},
		{"two stars then a slash also match no directory", "src/**/*.go", "src/main.go", true},
		{"two stars then a slash match many directories", "src/**/*.go", "src/a/b/main.go", true},
		{"two stars then a slash still need the rest to match", "src/**/*.go", "src/a/b/main.rs", false},
		{"two stars at the start match any prefix", "**/.env", "/ws/app/.env", true},
		{"two stars at the start match no prefix", "**/.env", ".env", true},
		{"two stars in an element match across elements", "/ws/**.pem", "/ws/certs/a/key.pem", true},
		{"a question mark matches one character", "file?.txt", "file1.txt", true},
		{"a question mark needs exactly one character", "file?.txt", "file.txt", false},
		{"a question mark does not match a slash", "a?b", "a/b", false},
		{"a question mark matches one multibyte character", "caf?", "café", true},
		{"a backslash makes a star literal", `a\*b`, "a*b", true},
		{"an escaped star does not match a run", `a\*b`, "axxb", false},
		{"a bracket is literal", "[ab].go", "[ab].go", true},
		{"an empty pattern matches only an empty path", "", "", true},
		{"an empty pattern does not match a path", "", "a", false},
		{"many stars stay linear and correct", "**a**a**a**a**a**b", strings.Repeat("a", 200), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Glob(tt.pattern, tt.path); got != tt.want {
				t.Errorf("Glob(%q, %q) = %t; want %t", tt.pattern, tt.path, got, tt.want)
			}
		})
	}
}

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

// symlinkTree builds a workspace with a symlink that points out of it:
//
//	root/ws/src/main.go
//	root/ws/inner -> src        (stays inside)
//	root/ws/escape -> ../outside (leads out)
//	root/outside/secret
//	root/wslink -> ws           (the workspace under another name)
//	root/ws/dangling -> ../outside/new (a target that does not exist yet)
//	root/ws/loop -> loop         (a symlink loop)
//
// and returns root, with symlinks resolved so that expected paths compare.
func symlinkTree(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"ws/src", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ws/src/main.go", "outside/secret"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"ws/inner": "src", "ws/escape": "../outside", "wslink": "ws",
		"ws/dangling": "../outside/new", "ws/loop": "loop",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestInWorkspace(t *testing.T) {
	root := symlinkTree(t)
	ws := filepath.Join(root, "ws")
	tests := []struct {
		name      string
		path      string
		workspace string
		base      string // relative to root; "" for none
		relative  bool   // path is given as is, relative to base
		want      bool
	}{
		{"a file in the workspace is in it", "ws/src/main.go", "ws", "", false, true},
		{"the workspace itself is in it", "ws", "ws", "", false, true},
		{"a file that does not exist yet is judged by its parent", "ws/src/new.go", "ws", "", false, true},
		{"a directory that does not exist yet is judged by its parent", "ws/new/dir/file", "ws", "", false, true},
		{"dot-dot out of the workspace is not in it", "ws/src/../../outside/secret", "ws", "", false, false},
		{"dot-dot that stays inside is in it", "ws/src/../src/main.go", "ws", "", false, true},
		{"a symlink out of the workspace is not in it", "ws/escape/secret", "ws", "", false, false},
		{"a new file through a symlink out of the workspace is not in it", "ws/escape/new/file", "ws", "", false, false},
		{"the symlink out of the workspace is not in it", "ws/escape", "ws", "", false, false},
		{"a symlink that stays inside is in it", "ws/inner/main.go", "ws", "", false, true},
		{"a path through a symlinked workspace name is in it", "wslink/src/main.go", "ws", "", false, true},
		{"a path is in a workspace named through a symlink", "ws/src/main.go", "wslink", "", false, true},
		{"a sibling whose name extends the workspace's is not in it", "ws2/file", "ws", "", false, false},
		{"a relative path is taken from base", "src/main.go", "ws", "ws", true, true},
		{"a relative path that climbs out of base is not in it", "../outside/secret", "ws", "ws", true, false},
		{"an empty path is not in it", "", "ws", "", false, false},
		{"nothing is in an empty workspace", "ws/src/main.go", "", "", false, false},
	}
	at := func(p string) string {
		if p == "" {
			return ""
		}
		return root + "/" + p // not Join: InWorkspace must do the cleaning
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if !tt.relative {
				path = at(path)
			}
			ws, base := at(tt.workspace), at(tt.base)
			if got := InWorkspace(path, ws, base); got != tt.want {
				t.Errorf("InWorkspace(%q, %q, %q) = %t; want %t", path, ws, base, got, tt.want)
			}
		})
	}
	t.Run("dot-dot after a symlink and a dangling symlink out of the workspace are not in it", func(t *testing.T) {
		// ws/escape/../src is outside/../src, i.e. root/src: the kernel
		// resolves the link before the dot-dot. And creating ws/dangling
		// creates outside/new. Under gets both right (resolvePath);
		// InWorkspace must do the same.
		for _, p := range []string{ws + "/escape/../src/main.go", ws + "/dangling"} {
			if InWorkspace(p, ws, "") {
				t.Errorf("InWorkspace(%q, ws) = true", p)
			}
		}
	})
	t.Run("the root directory contains every absolute path", func(t *testing.T) {
		if !InWorkspace(filepath.Join(ws, "src"), "/", "") {
			t.Error("InWorkspace(ws/src, /) = false")
		}
	})
}

func TestUnder(t *testing.T) {
	root := symlinkTree(t)
	ws := filepath.Join(root, "ws")
	tests := []struct {
		name string
		path string
		dir  string
		want bool
	}{
		{"a file inside the directory is under it", ws + "/src/main.go", ws, true},
		{"the directory is under itself", ws, ws, true},
		{"a trailing slash on the directory does not matter", ws + "/src/main.go", ws + "/", true},
		{"dot-dot out of the directory is not under it", ws + "/src/../../outside/secret", ws, false},
		{"a symlink out of the directory is not under it", ws + "/escape/secret", ws, false},
		{"a symlink that stays inside is under it", ws + "/inner/main.go", ws + "/src", true},
		{"a sibling whose name extends the directory's is not under it", ws + "2/x", ws, false},
		{"dot-dot after a symlink climbs from the symlink's target", ws + "/escape/../src/main.go", ws, false},
		{"dot-dot after a directory climbs from it", ws + "/src/../src/main.go", ws, true},
		{"a dangling symlink out of the directory is not under it", ws + "/dangling", ws, false},
		{"a path through a symlink loop is under nothing", ws + "/loop/x", ws, false},
		{"a path through a symlinked directory name is under it", root + "/wslink/src/main.go", ws, true},
		{"a new path climbing out of a new directory is not under it", ws + "/new/../../outside/x", ws, false},
		{"a new path staying inside a new directory is under it", ws + "/new/../x", ws, true},
		{"relative paths are compared after cleaning", "src/a/../b.go", "src", true},
		{"a relative path that climbs out is not under it", "src/../../x", "src", false},
		{"any relative path that stays is under dot", "a/b", ".", true},
		{"a relative path that climbs is not under dot", "../a", ".", false},
		{"an absolute path is not under a relative directory", ws, "ws", false},
		{"a relative path is not under an absolute directory", "src/main.go", ws, false},
		{"an empty path is under nothing", "", ws, false},
		{"nothing is under an empty directory", ws, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Under(tt.path, tt.dir); got != tt.want {
				t.Errorf("Under(%q, %q) = %t; want %t", tt.path, tt.dir, got, tt.want)
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

// TestInWorkspaceAfterMissingParentsAreCreated judges paths through
// directories that do not exist yet as the file system will be once a tool
// has created them: a `..` after a missing element goes back to the real
// directory it would be created in, and symlinks after it are followed.
//
//	root/ws/src/
//	root/ws/link -> root/outside (absolute)  root/ws/rel -> ../outside
//	root/ws/chain1 -> chain2 -> link         root/ws/inner -> src
//	root/ws/via -> new/../link (a target through a missing element)
func TestInWorkspaceAfterMissingParentsAreCreated(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"ws/src", "outside"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"ws/link": root + "/outside", "ws/rel": "../outside", "ws/chain1": "chain2", "ws/chain2": "link",
		"ws/inner": "src", "ws/via": "new/../link",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	ws := root + "/ws"
	tests := []struct {
		name string
		path string // under ws
		want bool
	}{
		{"a missing directory then dot-dot then a symlink out is outside", "missing/../link/f", false},
		{"two missing directories then two dot-dots then a symlink out is outside", "missing/a/../../link/f", false},
		{"a missing directory then dot-dot then a relative symlink out is outside", "missing/../rel/f", false},
		{"a missing directory then dot-dot then a chain of symlinks out is outside", "missing/../chain1/f", false},
		{"a symlink whose target goes through a missing directory is followed", "via/f", false},
		{"dot-dots between symlinks inside and out are followed", "missing/../inner/../link/f", false},
		{"a missing directory then dot-dot then a directory inside is inside", "missing/../src/f", true},
		{"missing directories and dot-dots that stay inside are inside", "missing/../other/../inner/f", true},
		{"a missing directory then dot-dots that climb out are outside", "missing/../../outside/f", false},
		{"a missing directory then dot-dots that climb out and back are inside", "missing/../../ws/src/f", true},
		{"dot-dots after a symlink out climb from its target", "rel/missing/../../ws/src/f", true},
		{"a missing directory under a symlink out is outside", "link/missing/../f", false},
		{"a missing file in a missing directory is inside", "new/dir/f", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ws + "/" + tt.path
			if got := InWorkspace(path, ws, ""); got != tt.want {
				t.Errorf("InWorkspace(%q) = %t; want %t", tt.path, got, tt.want)
			}
			if got := Under(path, ws); got != tt.want {
				t.Errorf("Under(%q) = %t; want %t", tt.path, got, tt.want)
			}
		})
	}
}
