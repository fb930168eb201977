package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Blobs is a content-addressed store shared by the submitting client and
// every worker (a directory on a shared file system when they are on
// several machines): the workflow file and its WASM modules travel
// through it by hash, and so do results too large for a Temporal payload
// (2 MiB). A blob never changes once written, so reading one is as
// deterministic as the hash that names it.
type Blobs struct{ Dir string }

// Put stores data and returns its hash ("sha256:…"). Writing a blob that
// exists is a no-op.
func (b Blobs) Put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	path := filepath.Join(b.Dir, name)
	if _, err := os.Stat(path); err == nil {
		return "sha256:" + name, nil
	}
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return "", fmt.Errorf("blobs: %w", err)
	}
	tmp, err := os.CreateTemp(b.Dir, ".put-*")
	if err != nil {
		return "", fmt.Errorf("blobs: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("blobs: %w", err)
	}
	return "sha256:" + name, nil
}

// Get reads the blob named by hash, checking that its content is that hash.
func (b Blobs) Get(hash string) ([]byte, error) {
	name, ok := strings.CutPrefix(hash, "sha256:")
	if _, err := hex.DecodeString(name); !ok || err != nil || len(name) != 64 {
		return nil, fmt.Errorf("blobs: %q is not a blob's hash", hash)
	}
	data, err := os.ReadFile(filepath.Join(b.Dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("blobs: %s is not in %s (do the client and the workers share the blob directory?)", hash, b.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("blobs: %w", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != name {
		return nil, fmt.Errorf("blobs: %s in %s does not hold what its name says", hash, b.Dir)
	}
	return data, nil
}
