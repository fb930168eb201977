package regularfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func writeHello(path string) error {
	return Write(path, func(f *os.File) error {
		_, err := f.WriteString("hello\n")
		return err
	})
}

// leftovers lists the temporary files Write left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestWriteMakesOrReplacesOnlyARegularFile: the class of input is the path
// written: a new path, an existing regular file (written whole, private),
// and everything a rename would replace instead of writing through: a
// symlink (to a regular file, dangling, to a device), a named pipe, a
// device node, a socket, a directory. Those are refused, left as they
// were, and no temporary file stays behind.
func TestWriteMakesOrReplacesOnlyARegularFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("the target\n"), 0o644)

	t.Run("a new path is created, private", func(t *testing.T) {
		p := filepath.Join(dir, "new.json")
		if err := writeHello(p); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "hello\n" {
			t.Errorf("content %q", b)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600", st.Mode())
		}
	})
	t.Run("a regular file is replaced whole", func(t *testing.T) {
		p := filepath.Join(dir, "old.json")
		os.WriteFile(p, []byte("an old and longer content\n"), 0o644)
		if err := writeHello(p); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != "hello\n" {
			t.Errorf("content %q", b)
		}
	})

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	if fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0); err == nil {
		syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock})
		defer syscall.Close(fd)
	}
	dev := filepath.Join(dir, "null")
	haveDev := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3) == nil // as /dev/null
	os.Mkdir(filepath.Join(dir, "subdir"), 0o755)
	os.Symlink(target, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "dangling"))
	os.Symlink("/dev/null", filepath.Join(dir, "devlink"))
	for _, c := range []struct {
		name, kind string
		skip       bool
	}{
		{"link", "a symbolic link", false},
		{"dangling", "a symbolic link", false},
		{"devlink", "a symbolic link", false},
		{"fifo", "a named pipe", false},
		{"sock", "a socket", false},
		{"null", "a character device", !haveDev},
		{"subdir", "a directory", false},
	} {
		t.Run(c.kind+" ("+c.name+") is refused", func(t *testing.T) {
			if c.skip {
				t.Skip("mknod is not allowed here")
			}
			p := filepath.Join(dir, c.name)
			before, _ := os.Lstat(p)
			err := writeHello(p)
			var nr *NotReplacedError
			if !errors.As(err, &nr) || nr.Kind != c.kind || !strings.Contains(err.Error(), p+" is "+c.kind+", not a regular file") {
				t.Fatalf("error %v, want it refused as %s", err, c.kind)
			}
			after, err := os.Lstat(p)
			if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Errorf("%s was changed: %v", p, err)
			}
		})
	}
	if b, _ := os.ReadFile(target); string(b) != "the target\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if left := leftovers(t, dir); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := writeHello(filepath.Join(dir, "missing", "x.json")); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("a path in a missing directory: %v", err)
	}
}

// TestWriteRefusesWhatIsSwappedInBeforeTheRename: the class of input is a
// path that was a new path or a regular file when it was checked and is
// something else at the rename (a symlink, a named pipe, a directory): the
// rename does not land on it, it is left as it was, and nothing stays
// behind. The swap comes after Write's last look at the path: only the
// rename itself (renameat2) can catch it, which is Linux's.
func TestWriteRefusesWhatIsSwappedInBeforeTheRename(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the rename checks what it replaces on Linux only")
	}
	for _, c := range []struct {
		name, kind string
		existing   bool // a regular file at the check
		swap       func(p string) error
	}{
		{"a symlink made at a new path", "a symbolic link", false, func(p string) error { return os.Symlink("/dev/null", p) }},
		{"a symlink put over a regular file", "a symbolic link", true, func(p string) error {
			os.Remove(p)
			return os.Symlink("/dev/null", p)
		}},
		{"a named pipe put over a regular file", "a named pipe", true, func(p string) error {
			os.Remove(p)
			return syscall.Mkfifo(p, 0o600)
		}},
		{"a directory made at a new path", "a directory", false, func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "out.json")
			if c.existing {
				os.WriteFile(p, []byte("old\n"), 0o600)
			}
			testHookRename = func(string) {
				if err := c.swap(p); err != nil {
					t.Fatal(err)
				}
			}
			defer func() { testHookRename = nil }()
			err := Write(p, func(f *os.File) error {
				_, err := f.WriteString("new\n")
				return err
			})
			var nr *NotReplacedError
			if !errors.As(err, &nr) || nr.Kind != c.kind {
				t.Fatalf("error %v, want it refused as %s", err, c.kind)
			}
			after, err := os.Lstat(p)
			if err != nil || Kind(after.Mode()) != c.kind {
				t.Errorf("%s is now %v (%v), want it left %s", p, after, err, c.kind)
			}
			if left := leftovers(t, dir); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
