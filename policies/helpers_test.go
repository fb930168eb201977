package policies

import (
	"os"
	"path/filepath"
	"slices"
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

func TestCommands(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []string
	}{
		{"a simple command is itself", "ls -la", []string{"ls -la"}},
		{"and-and separates commands", "make && rm -rf x", []string{"make", "rm -rf x"}},
		{"or-or separates commands", "test -f x || rm -rf x", []string{"test -f x", "rm -rf x"}},
		{"a semicolon separates commands", "cd /tmp;rm -rf x", []string{"cd /tmp", "rm -rf x"}},
		{"a pipe separates commands", "curl -s x | sh", []string{"curl -s x", "sh"}},
		{"a pipe with stderr separates commands", "make |& tee log", []string{"make", "tee log"}},
		{"a newline separates commands", "make\nrm -rf x\n", []string{"make", "rm -rf x"}},
		{"a background ampersand separates commands", "sleep 9 & rm -rf x", []string{"sleep 9", "rm -rf x"}},
		{"a redirection ampersand does not separate", "make 2>&1 >log", []string{"make 2>&1 >log"}},
		{"an ampersand-greater redirection does not separate", "make &>log", []string{"make &>log"}},
		{"operators in double quotes do not separate", `echo "a && b; c | d"`, []string{`echo "a && b; c | d"`}},
		{"operators in single quotes do not separate", `echo 'a && b' && ls`, []string{`echo 'a && b'`, "ls"}},
		{"an escaped semicolon does not separate", `find . -exec rm {} \; && ls`, []string{`find . -exec rm {} \;`, "ls"}},
		{"an escaped quote inside double quotes does not close them", `echo "a \" && b" && ls`, []string{`echo "a \" && b"`, "ls"}},
		{"empty commands are dropped", " ; ;; && ls ; ", []string{"ls"}},
		{"an empty line has no commands", "", nil},
		{"a command substitution's commands follow their command", "echo $(rm -rf x) && ls", []string{"echo $(rm -rf x)", "rm -rf x", "ls"}},
		{"a substitution inside double quotes is split too", `echo "$(curl x | sh)"`, []string{`echo "$(curl x | sh)"`, "curl x", "sh"}},
		{"backticks are split like a substitution", "echo `rm -rf x`", []string{"echo `rm -rf x`", "rm -rf x"}},
		{"nested substitutions are split", "a $(b $(c; d))", []string{"a $(b $(c; d))", "b $(c; d)", "c", "d"}},
		{"a process substitution is split", "diff <(ls a) <(ls b)", []string{"diff <(ls a) <(ls b)", "ls a", "ls b"}},
		{"a subshell's parentheses separate", "(cd x && rm -rf y)", []string{"cd x", "rm -rf y"}},
		{"braces and closing words are removed", "{ rm -rf x; }", []string{"rm -rf x"}},
		{"reserved words in front are removed", "if true; then rm -rf x; else ls; fi", []string{"true", "rm -rf x", "ls"}},
		{"a loop body is found", "for f in *; do rm $f; done", []string{"for f in *", "rm $f"}},
		{"a negation is removed", "! grep -q x f", []string{"grep -q x f"}},
		{"an unclosed quote runs to the end", `echo "a && b`, []string{`echo "a && b`}},
		{"an unclosed substitution runs to the end", "echo $(rm -rf x && ls", []string{"echo $(rm -rf x && ls", "rm -rf x", "ls"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Commands(tt.line); !slices.Equal(got, tt.want) {
				t.Errorf("Commands(%q) = %q; want %q", tt.line, got, tt.want)
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
