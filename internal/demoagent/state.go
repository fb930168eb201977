package demoagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/coder/acp-go-sdk"
)

// StateEnv names the environment variable that sets the directory where the demo agent saves
// its sessions. Without it, the directory is acpflow-demo-<uid> under os.TempDir().
//
// # Notes
//
// acpflow's env policies drop every ambient ACPFLOW_* variable from an agent's environment, so
// a workflow that wants its demo agent to use a directory sets StateEnv in the agent's own env
// values; the default directory needs nothing, as long as TMPDIR is the same for every process.
const StateEnv = "ACPFLOW_DEMO_STATE"

// savedSession is a session's file: what a fresh demo process needs to load, resume or fork it.
type savedSession struct {
	SessionID acp.SessionId `json:"sessionId"`
	Cwd       string        `json:"cwd"`
	// Echoes are the first lines of the prompts of the completed turns, oldest first.
	Echoes []string `json:"echoes"`
	// ToolCalls is the session's tool call counter, so that a continued session does not reuse
	// a tool call id.
	ToolCalls int `json:"toolCalls"`
}

// errNoSavedSession is load's answer for a valid session id that has no file.
var errNoSavedSession = errors.New("no saved session")

// sessionStore keeps one JSON file per session, named after its id, in dir: sessions outlive
// the process, which is what lets a later step continue an earlier one on a fresh process.
type sessionStore struct {
	dir string
	// shared is set for the default directory under os.TempDir(), where another user can
	// create the directory first: it must then be ours and closed to others, or a session's
	// prompts would leak or be planted.
	shared bool
}

// sessionStoreFromEnv is the store StateEnv names, or the default one. A relative StateEnv is
// made absolute against the working directory at start, so that it keeps naming one directory.
func sessionStoreFromEnv() sessionStore {
	if dir := os.Getenv(StateEnv); dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		return sessionStore{dir: dir}
	}
	return sessionStore{dir: filepath.Join(os.TempDir(), fmt.Sprintf("acpflow-demo-%d", os.Getuid())), shared: true}
}

// validSessionID reports whether id has the form the demo agent mints, "demo-" and lowercase
// hex digits. Only such an id is used in a file name, so that no id can name a file outside
// the store (demo-../../x) or two names the same file on a case-insensitive file system.
func validSessionID(id acp.SessionId) bool {
	digits, ok := strings.CutPrefix(string(id), "demo-")
	if !ok || digits == "" || len(digits) > 64 {
		return false
	}
	for _, c := range digits {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func (st sessionStore) path(id acp.SessionId) (string, error) {
	if !validSessionID(id) {
		return "", fmt.Errorf("demo agent: session id %q is not one of the demo agent's (demo- and hex digits)", id)
	}
	return filepath.Join(st.dir, string(id)+".json"), nil
}

// save writes the session's file atomically (a temporary file renamed over it), so that a
// process loading it meanwhile reads the old or the new file, never half of one.
func (st sessionStore) save(s savedSession) error {
	path, err := st.path(s.SessionID)
	if err != nil {
		return err
	}
	if err := st.makeDir(); err != nil {
		return err
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("demo agent: saving session %s: %w", s.SessionID, err)
	}
	tmp, err := os.CreateTemp(st.dir, "."+string(s.SessionID)+"-*.tmp") // mode 0600
	if err != nil {
		return st.saveError(s.SessionID, err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return st.saveError(s.SessionID, err)
	}
	return nil
}

func (st sessionStore) saveError(id acp.SessionId, err error) error {
	return fmt.Errorf("demo agent: saving session %s in %s: %w; set %s to a writable directory", id, st.dir, err, StateEnv)
}

// load reads the session's file; errNoSavedSession when there is none.
func (st sessionStore) load(id acp.SessionId) (savedSession, error) {
	path, err := st.path(id)
	if err != nil {
		return savedSession{}, err
	}
	if st.shared {
		if err := st.checkPrivate(); errors.Is(err, fs.ErrNotExist) {
			return savedSession{}, errNoSavedSession
		} else if err != nil {
			return savedSession{}, err
		}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return savedSession{}, errNoSavedSession
	}
	if err != nil {
		return savedSession{}, fmt.Errorf("demo agent: reading session %s: %w", id, err)
	}
	var s savedSession
	if err := json.Unmarshal(data, &s); err != nil {
		return savedSession{}, fmt.Errorf("demo agent: reading session %s from %s: %w; delete the file to forget the session", id, path, err)
	}
	if s.SessionID != id {
		return savedSession{}, fmt.Errorf("demo agent: %s holds session %q, not %s; delete the file to forget the session", path, s.SessionID, id)
	}
	return s, nil
}

func (st sessionStore) makeDir() error {
	if !st.shared {
		if err := os.MkdirAll(st.dir, 0o700); err != nil {
			return fmt.Errorf("demo agent: creating the session directory: %w; set %s to a writable directory", err, StateEnv)
		}
		return nil
	}
	// Mkdir, not MkdirAll: os.TempDir() exists, and a directory found in its place is checked.
	if err := os.Mkdir(st.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("demo agent: creating the session directory: %w; set %s to a writable directory", err, StateEnv)
	}
	return st.checkPrivate()
}

// checkPrivate refuses a shared store's directory unless it is a real directory (not a
// symbolic link), owned by this user and closed to everyone else.
func (st sessionStore) checkPrivate() error {
	fi, err := os.Lstat(st.dir)
	if err != nil {
		return err
	}
	var problem string
	switch sys, ok := fi.Sys().(*syscall.Stat_t); {
	case !fi.IsDir():
		problem = "is not a directory"
	case ok && int(sys.Uid) != os.Getuid():
		problem = fmt.Sprintf("belongs to uid %d", sys.Uid)
	case fi.Mode().Perm()&0o077 != 0:
		problem = fmt.Sprintf("has mode %v, open to others", fi.Mode().Perm())
	default:
		return nil
	}
	return fmt.Errorf("demo agent: the session directory %s %s; remove it, or set %s to a directory of yours", st.dir, problem, StateEnv)
}
