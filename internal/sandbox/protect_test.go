//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// want is one operation in a sandbox and how it must end.
type want struct {
	name string
	op   []string
	want string
}

func (f fixture) check(t *testing.T, spec Spec, cases []want) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := f.run(t, spec, "", c.op...); r.stdout != c.want {
				t.Errorf("got %q, want %q (stderr %q)", r.stdout, c.want, r.stderr)
			}
		})
	}
}

// gitInit makes a repository at dir with git itself.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
}

// A repository's configuration and hooks stay read-only beneath a writable
// cwd, while what git writes to commit (objects, index, refs, HEAD, its
// locks) stays writable. Input class: the workspace's own repository, a
// nested one, one whose hooks/ and info/ are missing, and a linked
// worktree's .git file.
func TestARepositorysConfigurationStaysReadOnly(t *testing.T) {
	f := newFixture(t)
	git := filepath.Join(f.cwd, ".git")
	gitInit(t, f.cwd)
	nested := filepath.Join(f.cwd, "vendor", "lib")
	gitInit(t, nested)
	os.RemoveAll(filepath.Join(nested, ".git", "hooks"))
	os.RemoveAll(filepath.Join(nested, ".git", "info"))
	wt := filepath.Join(f.cwd, "wt")
	os.Mkdir(wt, 0o700)
	os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+git+"/worktrees/wt\n"), 0o600)
	os.MkdirAll(filepath.Join(git, "worktrees", "wt"), 0o700)
	os.WriteFile(filepath.Join(git, "worktrees", "wt", "commondir"), []byte("../..\n"), 0o600)
	os.WriteFile(filepath.Join(git, "worktrees", "wt", "HEAD"), []byte("ref: refs/heads/wt\n"), 0o600)

	sub := filepath.Join(f.cwd, "a", "b", "c", "sub")
	os.MkdirAll(sub, 0o700)
	os.WriteFile(filepath.Join(f.cwd, ".gitmodules"), []byte("[submodule \"s\"]\n\tpath = a/b/c/sub\n\turl = ../s\n"), 0o600)
	os.WriteFile(filepath.Join(sub, ".git"), []byte("gitdir: ../../../../.git/modules/s\n"), 0o600)
	os.MkdirAll(filepath.Join(git, "modules", "s", "hooks"), 0o700)
	os.WriteFile(filepath.Join(git, "modules", "s", "HEAD"), []byte("ref: refs/heads/main\n"), 0o600)
	os.WriteFile(filepath.Join(git, "modules", "s", "config"), []byte("[core]\n"), 0o600)

	f.check(t, f.spec(), []want{
		{"a deep submodule's .git file is read-only", []string{"write", filepath.Join(sub, ".git")}, "EROFS"},
		{"a submodule's config is read-only", []string{"append", filepath.Join(git, "modules", "s", "config")}, "EROFS"},
		{"appending to .git/config fails", []string{"append", filepath.Join(git, "config")}, "EROFS"},
		{"adding a hook fails", []string{"write", filepath.Join(git, "hooks", "pre-commit")}, "EROFS"},
		{"writing .git/info/attributes fails", []string{"write", filepath.Join(git, "info", "attributes")}, "EROFS"},
		{"removing .git/config fails", []string{"remove", filepath.Join(git, "config")}, "EBUSY"},
		{"renaming .git away fails", []string{"rename", git, filepath.Join(f.cwd, "old")}, "EBUSY"},
		{"renaming hooks away fails", []string{"rename", filepath.Join(git, "hooks"), filepath.Join(git, "h")}, "EBUSY"},
		{"a nested repository's config is read-only", []string{"append", filepath.Join(nested, ".git", "config")}, "EROFS"},
		{"a hook in a repository that had no hooks/ fails", []string{"write", filepath.Join(nested, ".git", "hooks", "post-checkout")}, "EROFS"},
		{"a worktree's .git file is read-only", []string{"write", filepath.Join(wt, ".git")}, "EROFS"},
		{"a worktree's commondir is read-only", []string{"write", filepath.Join(git, "worktrees", "wt", "commondir")}, "EROFS"},
		{"git's objects are writable", []string{"write", filepath.Join(git, "objects", "x")}, "ok"},
		{"git's index and locks are writable", []string{"write", filepath.Join(git, "index.lock")}, "ok"},
		{"a worktree's HEAD is writable", []string{"write", filepath.Join(git, "worktrees", "wt", "HEAD")}, "ok"},
		{"the workspace is writable", []string{"write", filepath.Join(f.cwd, "new.txt")}, "ok"},
	})
	spec := f.spec()
	spec.Write = []string{filepath.Join(git, "hooks")}
	f.check(t, spec, []want{
		{"hooks named exactly by write: are writable", []string{"write", filepath.Join(git, "hooks", "pre-push")}, "ok"},
	})
}

// The user's shell startup files and git config stay read-only even in a
// writable HOME, and missing ones cannot be made; the agent's HOME and
// the user's own are both covered. Input class: cwd = HOME with existing
// and missing startup files; an agent HOME other than the user's.
func TestStartupFilesAndSettingsStayReadOnly(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(filepath.Join(f.home, ".bashrc"), []byte("# rc\n"), 0o600)
	os.MkdirAll(filepath.Join(f.home, ".npm", "_npx"), 0o700)
	os.Mkdir(filepath.Join(f.home, "proj"), 0o700)
	spec := f.spec()
	spec.Cwd = f.home
	f.check(t, spec, []want{
		{"appending to ~/.bashrc fails", []string{"append", filepath.Join(f.home, ".bashrc")}, "EROFS"},
		{"making a missing ~/.zshrc fails", []string{"write", filepath.Join(f.home, ".zshrc")}, "EACCES"},
		{"making a missing ~/.gitconfig fails", []string{"write", filepath.Join(f.home, ".gitconfig")}, "EACCES"},
		{"planting a package in ~/.npm/_npx fails", []string{"mkdir", filepath.Join(f.home, ".npm", "_npx", "pkg")}, "EROFS"},
		{"making ~/.local/bin fails", []string{"mkdir", filepath.Join(f.home, ".local")}, "EACCES"},
		{"writing below an entry of HOME works", []string{"write", filepath.Join(f.home, "proj", "a")}, "ok"},
	})

	state := filepath.Join(f.home, ".agent")
	os.MkdirAll(filepath.Join(state, "sessions"), 0o700)
	os.WriteFile(filepath.Join(state, "config.toml"), []byte("x"), 0o600)
	spec = f.spec()
	spec.StateDirs = []string{state}
	spec.Protect = []string{filepath.Join(state, "config.toml"), filepath.Join(state, "settings.json")}
	f.check(t, spec, []want{
		{"an existing settings file is read-only", []string{"append", filepath.Join(state, "config.toml")}, "EROFS"},
		{"the agent's sessions stay writable", []string{"write", filepath.Join(state, "sessions", "s1")}, "ok"},
		// A state dir's top stays open (codex adds databases there): a
		// missing settings file can be made, and steps/confine moves it
		// aside once the agent is gone.
		{"a new file at a state dir's top can be made", []string{"write", filepath.Join(state, "history.db")}, "ok"},
	})
	extra := filepath.Join(f.root, "extra")
	os.Mkdir(extra, 0o700)
	spec = f.spec()
	spec.Write = []string{extra}
	spec.Protect = []string{filepath.Join(extra, "hooks.json")}
	f.check(t, spec, []want{
		{"a missing protected file cannot be made in a write: path", []string{"write", filepath.Join(extra, "hooks.json")}, "EACCES"},
		{"below the write: path's entries is writable", []string{"write", filepath.Join(f.tmp, "x")}, "ok"},
	})
}

// The deny list covers the home of the user acpflow runs as when the
// agent gets another HOME. Input class: an agent HOME without keys, the
// user's home with them.
func TestTheUsersOwnHomeIsDeniedToo(t *testing.T) {
	f := newFixture(t)
	agentHome := filepath.Join(f.root, "agent-home")
	os.Mkdir(agentHome, 0o700)
	spec := f.spec()
	spec.Home, spec.UserHome = agentHome, f.home
	f.check(t, spec, []want{
		{"the user's ~/.ssh/id_rsa is unreadable", []string{"read", filepath.Join(f.home, ".ssh", "id_rsa")}, "EACCES"},
		{"the user's globbed entry is unreadable", []string{"read", filepath.Join(f.home, ".cargo", "credentials.toml")}, "EACCES"},
		{"the user's other files are readable", []string{"read", filepath.Join(f.home, "notes", "todo")}, "ok"},
	})
}

// A writable path or cwd that resolves through a symlink into a denied
// path is refused before anything starts. Input class: write: a link to
// ~/.ssh; a link to a link; cwd a link into ~/.ssh.
func TestAWritablePathThatResolvesIntoADeniedOneIsRefused(t *testing.T) {
	f := newFixture(t)
	link := filepath.Join(f.root, "cache")
	os.Symlink(filepath.Join(f.home, ".ssh"), link)
	link2 := filepath.Join(f.root, "cache2")
	os.Symlink(link, link2)
	self, _ := os.Executable()
	for name, spec := range map[string]Spec{
		"write: a link":         {Cwd: f.cwd, TmpDir: f.tmp, Home: f.home, Write: []string{link}},
		"write: a link's link":  {Cwd: f.cwd, TmpDir: f.tmp, Home: f.home, Write: []string{link2}},
		"cwd a link below one":  {Cwd: filepath.Join(link2, "sub"), TmpDir: f.tmp, Home: f.home},
		"the user's home's key": {Cwd: f.cwd, TmpDir: f.tmp, Home: f.root, UserHome: f.home, Write: []string{link}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Command(self, []string{"sandbox-launch"}, spec, "/bin/true", nil)
			if err == nil || !strings.Contains(err.Error(), filepath.Join(f.home, ".ssh")) {
				t.Errorf("Command: %v, want a refusal naming %s", err, filepath.Join(f.home, ".ssh"))
			}
		})
	}
}

// /dev/shm is the step's own: nothing the agent writes there is seen
// outside, and nothing outside is seen in it.
func TestDevShmIsPrivate(t *testing.T) {
	if !exists("/dev/shm") {
		t.Skip("no /dev/shm here")
	}
	f := newFixture(t)
	outside, err := os.CreateTemp("/dev/shm", "acpflow-test-")
	if err != nil {
		t.Skip(err)
	}
	outside.Close()
	t.Cleanup(func() { os.Remove(outside.Name()) })
	inside := "/dev/shm/acpflow-test-" + f.mark
	f.check(t, f.spec(), []want{
		{"writing in /dev/shm works", []string{"write", inside}, "ok"},
		{"another process's file is not there", []string{"read", outside.Name()}, "ENOENT"},
	})
	if exists(inside) {
		os.Remove(inside)
		t.Errorf("%s written in the sandbox is seen outside it", inside)
	}
}

// Unix sockets outside the sandbox are refused under network off and a
// host list, and reachable with the network on. Input class: a path
// socket beside the workspace (as docker.sock is).
func TestUnixSocketsOutsideAreRefusedOffTheNetwork(t *testing.T) {
	f := newFixture(t)
	sock := filepath.Join(f.outside, "s.sock")
	serve(t, "unix", sock)
	for _, c := range []struct {
		network Network
		want    string
	}{{NetworkOn, "ok"}, {NetworkOff, "EACCES"}, {NetworkProxy, "EACCES"}} {
		t.Run(string(c.network), func(t *testing.T) {
			spec := f.spec()
			spec.Network, spec.ProxyPort = c.network, 3128
			if r := f.run(t, spec, "", "unix", sock); r.stdout != c.want {
				t.Errorf("got %q, want %q (stderr %q)", r.stdout, c.want, r.stderr)
			}
		})
	}
}

// What an earlier agent left in the workspace cannot stall the next
// spawn: a .gitmodules that is a FIFO (which a plain read waits on for
// ever) or a link to /dev/zero is not read.
func TestAPlantedGitmodulesDoesNotStallTheSpawn(t *testing.T) {
	for _, plant := range []string{"fifo", "zero"} {
		t.Run(plant, func(t *testing.T) {
			f := newFixture(t)
			gitInit(t, f.cwd)
			p := filepath.Join(f.cwd, ".gitmodules")
			if plant == "fifo" {
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				os.Symlink("/dev/zero", p)
			}
			f.check(t, f.spec(), []want{
				{"the agent starts and writes its workspace", []string{"write", filepath.Join(f.cwd, "a")}, "ok"},
				{"the repository's config is still read-only", []string{"append", filepath.Join(f.cwd, ".git", "config")}, "EROFS"},
			})
		})
	}
}
