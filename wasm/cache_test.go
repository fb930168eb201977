package wasm_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/acpflow/acpflow/wasm"
)

// cacheEntries maps each file of the on-disk cache under dir to its bytes.
func cacheEntries(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		entries[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// A cache entry broken in any way (emptied, cut short, overwritten, a
// flipped byte in the code, unreadable) must not fail the module: the load
// compiles it afresh and puts a good entry in its place.
func TestACorruptedCacheEntryIsReplaced(t *testing.T) {
	corruptions := []struct {
		name    string
		corrupt func(path string, good []byte) error
	}{
		{"emptied", func(p string, _ []byte) error { return os.WriteFile(p, nil, 0o600) }},
		{"cut in half", func(p string, good []byte) error { return os.WriteFile(p, good[:len(good)/2], 0o600) }},
		{"the header overwritten", func(p string, good []byte) error {
			return os.WriteFile(p, append([]byte("garbage!"), good[8:]...), 0o600)
		}},
		{"a byte of code flipped", func(p string, good []byte) error {
			bad := bytes.Clone(good)
			bad[len(bad)/2] ^= 0xff
			return os.WriteFile(p, bad, 0o600)
		}},
		{"a length made huge", func(p string, good []byte) error {
			bad := bytes.Clone(good)
			copy(bad[len(bad)-64:], bytes.Repeat([]byte{0xff}, 16))
			return os.WriteFile(p, bad, 0o600)
		}},
		{"unreadable", func(p string, _ []byte) error { return os.Chmod(p, 0) }},
	}
	for _, c := range corruptions {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "unreadable" && os.Geteuid() == 0 {
				t.Skip("root reads files whatever their mode")
			}
			t.Setenv("XDG_CACHE_HOME", t.TempDir())
			call := func() {
				t.Helper()
				h := newHost(t)
				m := load(t, h, "testdata/counter.wasm", wasm.Limits{})
				if answer, _, err := m.Call(context.Background(), "permission", []byte(`{}`)); err != nil || string(answer) != `{"calls":1}` {
					t.Fatalf("Call = %s, %v", answer, err)
				}
				_ = h.Close(context.Background())
			}
			call() // fills the cache
			dir := newHost(t).CacheDir()
			good := cacheEntries(t, dir)
			if len(good) == 0 {
				t.Fatal("the first load wrote no cache entry")
			}
			for path, b := range good {
				if err := c.corrupt(path, b); err != nil {
					t.Fatal(err)
				}
			}
			call() // must compile afresh and replace the entry
			if after := cacheEntries(t, dir); len(after) != len(good) {
				t.Errorf("the cache has %d files after the repair, want %d (no leftovers)", len(after), len(good))
			} else {
				for path, b := range good {
					if !bytes.Equal(after[path], b) {
						t.Errorf("%s was not replaced by a good entry", path)
					}
				}
			}
			call() // and loads from the good entry
		})
	}
}
