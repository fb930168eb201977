package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/regularfile"
	"github.com/acpflow/acpflow/wasm"
	"github.com/acpflow/acpflow/workflows"
)

// Bundle names a workflow file and the WASM modules its policies load, by
// content hash in Blobs, so that a worker on any machine loads exactly
// what was submitted.
type Bundle struct {
	Name    string            // the file's base name, for messages
	Source  string            // the file's hash
	Modules map[string]string `json:",omitempty"` // each module as the file names it → its hash
}

// NewBundle stores the workflow file at path (loaded as wf) and its
// modules in b. A module named by an absolute path is refused: a worker
// could not place it.
func NewBundle(b Blobs, path string, wf *engine.Workflow) (Bundle, error) {
	src, err := workflows.ReadFile(path, "workflow")
	if err != nil {
		return Bundle{}, err
	}
	bundle := Bundle{Name: filepath.Base(path), Modules: map[string]string{}}
	if bundle.Source, err = b.Put(src); err != nil {
		return Bundle{}, err
	}
	for _, m := range wf.Modules {
		if filepath.IsAbs(m) {
			return Bundle{}, fmt.Errorf("%s: the WASM module %s is named by an absolute path; name it relative to the workflow file, so that a worker can be given it", path, m)
		}
		// Read as the WASM loader read it: a regular file, bounded.
		data, err := regularfile.Read(filepath.Join(filepath.Dir(path), m), wasm.MaxModuleSize)
		if err != nil {
			return Bundle{}, err
		}
		if bundle.Modules[m], err = b.Put(data); err != nil {
			return Bundle{}, err
		}
	}
	return bundle, nil
}

// key is the bundle's identity: its file and modules.
func (bd Bundle) key() string {
	h := sha256.New()
	fmt.Fprintln(h, bd.Name, bd.Source)
	names := make([]string, 0, len(bd.Modules))
	for m := range bd.Modules {
		names = append(names, m)
	}
	slices.Sort(names)
	for _, m := range names {
		fmt.Fprintln(h, m, bd.Modules[m])
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// unpack writes the bundle's file and modules under dir, each module where
// the file names it relative to itself, and loads the workflow from there.
// A module that goes up (../policies/x.wasm) puts the file as many
// directories down.
func (bd Bundle) unpack(b Blobs, dir string) (*engine.Workflow, error) {
	if bd.Name == "" || bd.Name != filepath.Base(bd.Name) || bd.Name == ".." || bd.Name == "." {
		return nil, fmt.Errorf("bundle: %q is not a file name", bd.Name)
	}
	root := filepath.Join(dir, bd.key())
	depth := 0
	for m := range bd.Modules {
		rel := filepath.Clean(m)
		if filepath.IsAbs(rel) {
			return nil, fmt.Errorf("bundle %s: module %s is absolute", bd.Name, m)
		}
		ups := 0
		for strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			rel, ups = rel[3:], ups+1
		}
		if rel == ".." || strings.Contains(rel, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("bundle %s: module %s climbs out of its place", bd.Name, m)
		}
		depth = max(depth, ups)
	}
	fileDir := root
	for i := 0; i < depth; i++ {
		fileDir = filepath.Join(fileDir, fmt.Sprintf("d%d", i))
	}
	src, err := b.Get(bd.Source)
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(fileDir, bd.Name), src); err != nil {
		return nil, err
	}
	for m, hash := range bd.Modules {
		data, err := b.Get(hash)
		if err != nil {
			return nil, err
		}
		if err := writeFile(filepath.Join(fileDir, m), data); err != nil {
			return nil, err
		}
	}
	return workflows.Parse(filepath.Join(fileDir, bd.Name), src)
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp" + fmt.Sprint(os.Getpid())
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
