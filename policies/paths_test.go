package policies

import (
	"os"
	"path/filepath"
	"testing"
)

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
