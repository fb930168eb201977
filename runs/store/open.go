// Package store is the run store: a SQLite file in which every batch, run,
// step, permission decision, event and agent process is recorded as it
// happens, so that `acpflow runs` can list runs, `show` can show one, and
// `resume` can finish a run that failed or was interrupted without redoing
// its succeeded steps, and make sure no agent process it spawned survives.
//
// The engine writes through an adapter of its own; this package does not
// import the engine, so its record types are plain data.
//
// # Notes
//
//   - Runs, batches, steps and children are written synchronously: when the
//     call returns, the row is committed and survives acpflow being killed
//     (unless the call's context is Queued: then a later write waited for
//     commits it first).
//     Events are queued and written in batches by a goroutine (see
//     AppendEvent); those not yet written when the process dies are lost.
//   - Writes are not cancelled with their context: a run's context is
//     cancelled exactly when its cancelled steps and its end must be
//     recorded. Reads are.
//   - The store runs with synchronous=NORMAL in WAL mode: a commit survives a
//     crash of the process, but the last commits before a power loss or OS
//     crash may roll back. The file itself is never corrupted by either.
//   - Several acpflow processes may share one store: writes wait for each
//     other (busy timeout), reads never wait for writes (WAL).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go
)

// busyTimeoutMS is how long a write waits for another process's write
// transaction before failing with SQLITE_BUSY. A write transaction of the
// store lasts milliseconds; ten seconds only runs out when a process hangs
// holding the lock.
const busyTimeoutMS = 10_000

var (
	// ErrNotFound is returned (wrapped) when a run, batch or id prefix is not
	// in the store.
	ErrNotFound = errors.New("not found")
	// ErrAmbiguous is returned (wrapped) when an id prefix names more than
	// one run or batch.
	ErrAmbiguous = errors.New("ambiguous id prefix")
	// ErrNewerSchema is returned (wrapped) by Open for a store written by a
	// newer acpflow, whose schema this one does not know.
	ErrNewerSchema = errors.New("state store written by a newer acpflow")
)

// Store is an open run store. It is safe for concurrent use by many
// goroutines, and the file may be shared with other acpflow processes.
type Store struct {
	path string
	// w has exactly one connection, so this process's writes queue in
	// database/sql instead of contending for SQLite's write lock; its
	// transactions begin IMMEDIATE, so that a wait for another process
	// happens at BEGIN, where the busy timeout applies.
	w *sql.DB
	// r is a pool of read-only connections: in WAL mode readers see the
	// last commit and never wait for the writer.
	r *sql.DB

	// stmts are prepared on w by the writer goroutine, before it takes
	// the first write: only writes (which run there) use them.
	stmts  writeStmts
	events *eventQueue
	writer *writer
	// ready is closed once the store's schema is up to date and its
	// statements prepared (at once for OpenReadOnly); openErr is set
	// before, when that failed.
	ready   chan struct{}
	openErr error

	closeOnce sync.Once
	closeErr  error
}

// DefaultPath is where the store is when --state is not given (docs/cli.md):
// $ACPFLOW_STATE, else $XDG_STATE_HOME/acpflow/state.db, else
// ~/.local/state/acpflow/state.db. A relative $XDG_STATE_HOME is ignored,
// as the XDG base directory specification says.
func DefaultPath() (string, error) {
	if p := os.Getenv("ACPFLOW_STATE"); p != "" {
		return p, nil
	}
	dir, err := StateDir()
	if err != nil {
		return "", fmt.Errorf("find the state store: %w; set ACPFLOW_STATE or pass --state", err)
	}
	return filepath.Join(dir, "state.db"), nil
}

// StateDir is acpflow's state directory, where the store is by default:
// $XDG_STATE_HOME/acpflow, else ~/.local/state/acpflow.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "acpflow"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "acpflow"), nil
}

// Files are acpflow's own files that no sandbox may read
// (docs/sandbox.md): the store at path and the default store, each with
// SQLite's -wal and -shm beside it, and what acpflow's state directory
// holds besides the worktrees it makes there (runs.WorktreeDir: a step's
// cwd); absolute, each once.
//
// # Notes
//
// The state directory's entries are named one by one, not the directory
// whole, since a worktree below it is where an isolated step works.
func Files(path string) []string {
	var out []string
	add := func(p string) {
		if abs, err := filepath.Abs(p); err == nil && !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	for _, db := range []string{path, defaultPathOrEmpty()} {
		if db != "" {
			add(db)
			add(db + "-wal")
			add(db + "-shm")
		}
	}
	if dir, err := StateDir(); err == nil {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != WorktreesDir {
				add(filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

// WorktreesDir is the directory beside a store where acpflow makes the
// worktrees of its runs (runs.WorktreeDir).
const WorktreesDir = "worktrees"

func defaultPathOrEmpty() string {
	p, _ := DefaultPath()
	return p
}

// Open opens the store at path, creating it (mode 0600, in a directory
// created 0700: runs record prompts, outputs and agents' stderr) and
// bringing its schema up to date. Close it when done: Close writes the
// events still queued.
func Open(path string) (*Store, error) {
	s, err := OpenAsync(path)
	if err != nil {
		return nil, err
	}
	if err := s.Ready(context.Background()); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenAsync is Open without waiting for the schema: it returns once the
// file exists, and the writer goroutine brings the schema up to date and
// prepares the statements meanwhile. Writes queue behind that work, reads
// wait for it, and what it fails with (a store of a newer acpflow, a file
// that is not a store) is what they, and Ready, return.
//
// # Notes
//
// `acpflow run` opens its store so, while the step's agent starts: opening
// (SQLite's first connection, the schema, a dozen prepared statements) was
// several milliseconds of a one-step run's critical path (issue 28).
func OpenAsync(path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open state store: %w", err)
	}
	// SQLite would create the file 0644; create it first so that it, and the
	// -wal and -shm files SQLite gives the same mode, are private.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state store: %w", err)
	}
	f.Close()

	w, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		return nil, fmt.Errorf("open state store %s: %w", abs, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	r, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open state store %s: %w", abs, err)
	}
	readers := min(runtime.GOMAXPROCS(0), 4)
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)

	s := &Store{path: abs, w: w, r: r, ready: make(chan struct{})}
	s.writer = startWriter(w, func() error {
		if err := migrate(context.Background(), w, abs); err != nil {
			s.openErr = err
			return err
		}
		if err := s.stmts.prepare(context.Background(), w); err != nil {
			s.openErr = err
			return err
		}
		return nil
	}, s.ready)
	s.events = startEventQueue(s.writer, &s.stmts)
	return s, nil
}

// Ready waits until the store is open (see OpenAsync) and returns why it
// could not be, if it could not.
func (s *Store) Ready(ctx context.Context) error {
	select {
	case <-s.ready:
		return s.openErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// OpenErr is why the store could not be opened, once that is known (nil
// while it is being opened).
func (s *Store) OpenErr() error {
	select {
	case <-s.ready:
		return s.openErr
	default:
		return nil
	}
}

// dsn is the driver's name for the file: a file: URI, so that a path with
// '?' or '#' in it is not taken for parameters. The pragmas run on every new
// connection (journal_mode=WAL is stored in the file; the others are per
// connection).
func dsn(abs string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeoutMS))
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode()
}

// migrate applies the migrations the store has not had, each in its own
// transaction with the user_version it leads to, so a store is always at
// exactly one version. The version is read inside the (IMMEDIATE)
// transaction: two processes opening a new store at once do not both apply
// the same migration.
func migrate(ctx context.Context, db *sql.DB, path string) error {
	for {
		done, err := migrateOne(ctx, db, path)
		if err != nil || done {
			return err
		}
	}
}

func migrateOne(ctx context.Context, db *sql.DB, path string) (done bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("open state store %s: %w", path, err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return false, fmt.Errorf("open state store %s: read schema version: %w", path, err)
	}
	switch {
	case version > len(migrations):
		return false, fmt.Errorf("%w: %s has schema version %d, this acpflow knows up to %d; upgrade acpflow, or use another store (--state or $ACPFLOW_STATE)",
			ErrNewerSchema, path, version, len(migrations))
	case version == len(migrations):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
		return false, fmt.Errorf("open state store %s: migrate schema to version %d: %w", path, version+1, err)
	}
	// PRAGMA takes no parameters; version is an int we own.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
		return false, fmt.Errorf("open state store %s: set schema version %d: %w", path, version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("open state store %s: migrate schema to version %d: %w", path, version+1, err)
	}
	return false, nil
}

// Path is the store's file, absolute.
func (s *Store) Path() string { return s.path }

// CloseForExit ends the store of a process about to exit: like Close, it
// writes the queued events and waits for every write already asked for,
// but it leaves SQLite's connections to the exit instead of closing them.
// Later calls, and Close, return its result.
//
// # Notes
//
// Closing the last connection checkpoints the WAL into the database file
// (two fsyncs) and deletes it, and the next process's first commit then
// starts a new WAL with a synced header: three fsyncs a process, most of
// what a one-step run's store cost it (issue 28). Left open, the WAL keeps
// the committed transactions, which survive the exit as they survive a
// kill (the page cache holds them, as it does every commit under
// synchronous=NORMAL); the next process to open the store reads them back.
// Once the WAL is over exitCheckpointWAL, CloseForExit closes the store
// after all (a checkpoint, which SQLite skips while another process has
// the store open), so that reading it back stays cheap. Durability is what
// synchronous=NORMAL promised already: a commit survives the process, the
// last ones may not survive a power loss.
func (s *Store) CloseForExit() error {
	s.closeOnce.Do(func() {
		if s.readOnly() {
			s.closeErr = s.r.Close()
			return
		}
		evErr := s.events.close()
		s.writer.stop()
		if fi, err := os.Stat(s.path + "-wal"); err == nil && fi.Size() > exitCheckpointWAL {
			// Checkpoint now and then: the next opener reads the whole WAL
			// back (about 5 µs a page on the loaded 2-core machine).
			s.closeErr = errors.Join(evErr, s.stmts.close(), s.r.Close(), s.w.Close())
			return
		}
		s.closeErr = evErr
	})
	return s.closeErr
}

// exitCheckpointWAL is the WAL size beyond which CloseForExit closes the
// store after all, checkpointing it: about 250 pages, a dozen one-step runs.
// Reading it back costs the next process about a millisecond on the loaded
// 2-core machine; a checkpoint costs this one as much, once.
const exitCheckpointWAL = 1 << 20

// Close writes the queued events and closes the store. It is safe to call
// more than once; later calls return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.readOnly() {
			s.closeErr = s.r.Close()
			return
		}
		evErr := s.events.close()
		s.writer.stop()
		s.closeErr = errors.Join(evErr, s.stmts.close(), s.r.Close(), s.w.Close())
	})
	return s.closeErr
}
