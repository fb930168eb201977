package main

// End to end: the files acpflow reads and writes, under attack (issue 23):
// attachments swapped while the agent starts, transcript files of any size
// or kind (replay, policy test), export -o onto what is not a regular file.

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/acpflow/acpflow/internal/transcript/transcripttest"
)

// TestAttachSwappedWhileTheAgentStartsSendsTheFileChecked: the class of
// input is an attached path swapped after acpflow checked it, while the
// agent starts (issue 23's `ln -s /outside/key t && mv -T t ws/notes.md`),
// and its variants: the parent directory made a symlink out, a named pipe
// renamed over the file. The agent is the scripted one behind a shell that
// swaps first; it records the prompt it got, which holds the file as
// acpflow opened it and never the file outside.
func TestAttachSwappedWhileTheAgentStartsSendsTheFileChecked(t *testing.T) {
	const secret = "KEY-outside-4410"
	for _, c := range []struct{ name, swap string }{
		{"a symlink to a file outside", `ln -s "$OUT/key" ws/t && mv -T ws/t ws/docs/notes.md`},
		{"the parent directory swapped for a symlink out", `mv ws/docs ws/docs.old && ln -s "$OUT" ws/docs && ln -s key "$OUT/notes.md"`},
		{"a named pipe", `mkfifo ws/t && mv -T ws/t ws/docs/notes.md`},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			ws, out := filepath.Join(parent, "ws"), filepath.Join(parent, "outside")
			os.MkdirAll(filepath.Join(ws, "docs"), 0o755)
			os.MkdirAll(out, 0o755)
			os.WriteFile(filepath.Join(ws, "docs", "notes.md"), []byte("notes in the workspace\n"), 0o644)
			os.WriteFile(filepath.Join(out, "key"), []byte(secret), 0o600)
			rec := filepath.Join(parent, "record.jsonl")
			script := "cd '" + parent + "' && OUT='" + out + "' && " + c.swap + ` && exec "$0" "$@"`
			wf := writeWorkflow(t, parent, `name: attach
agents:
  a:
    command: /bin/sh
    args: `+agentArgs("-c", script, testAgent, "-record", rec, "-prompt-capabilities", "embeddedContext")+`
steps:
  - {id: s, uses: acp-subagent, with: {agent: a, prompt: Read the notes., attach: [docs/notes.md]}}
`)
			r := acpflow(t, parent, "run", wf, "--workspace", ws, "--state", filepath.Join(parent, "state.db"))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			assertAgentsGone(t, rec)
			prompts := 0
			for _, ev := range readRecords(t, rec) {
				if ev["event"] != "prompt" {
					continue
				}
				prompts++
				raw := fmt.Sprint(ev["params"])
				if strings.Contains(raw, secret) {
					t.Fatalf("the agent was sent the file outside the workspace: %s", raw)
				}
				if !strings.Contains(raw, "notes in the workspace") {
					t.Errorf("the prompt lacks the file acpflow checked: %s", raw)
				}
			}
			if prompts != 1 {
				t.Errorf("%d prompts recorded, want 1", prompts)
			}
		})
	}
}

// TestExportOutputIsANewPathOrARegularFile: the class of input is the path
// of export -o: a new path and a regular file are written (private,
// whole); a symlink (to a file, to a named pipe), a named pipe, a device
// node and a directory are refused with exit 2, left as they were, and
// nothing is left beside them. The devices and pipes are the test's own,
// never the system's.
func TestExportOutputIsANewPathOrARegularFile(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.db")
	id, _ := recordHello(t, dir, state)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	target := filepath.Join(dir, "target.txt")
	os.WriteFile(target, []byte("keep me\n"), 0o644)
	fifo := filepath.Join(out, "fifo")
	syscall.Mkfifo(fifo, 0o600)
	os.Symlink(target, filepath.Join(out, "link-to-file"))
	os.Symlink(fifo, filepath.Join(out, "link-to-fifo"))
	os.Mkdir(filepath.Join(out, "dir"), 0o755)
	dev := filepath.Join(out, "null")
	haveDev := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3) == nil // a /dev/null of the test's own

	for _, c := range []struct{ name, kind string }{
		{"link-to-file", "a symbolic link"}, {"link-to-fifo", "a symbolic link"},
		{"fifo", "a named pipe"}, {"null", "a character device"}, {"dir", "a directory"},
	} {
		t.Run(c.kind+" ("+c.name+") is refused", func(t *testing.T) {
			if c.name == "null" && !haveDev {
				t.Skip("mknod is not allowed here")
			}
			p := filepath.Join(out, c.name)
			before, _ := os.Lstat(p)
			r := acpflow(t, dir, "export", id, "-o", p, "--state", state)
			if want := p + " is " + c.kind + ", not a regular file"; r.code != 2 || !strings.Contains(r.stderr, want) {
				t.Errorf("exit %d, want 2 and %q\n%s", r.code, want, r.stderr)
			}
			if after, err := os.Lstat(p); err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Errorf("%s was replaced", p)
			}
		})
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	if ents, _ := filepath.Glob(filepath.Join(out, ".*")); len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}

	t.Run("a new path and a regular file are written whole, private", func(t *testing.T) {
		want := acpflow(t, dir, "export", id, "--state", state).stdout
		for _, p := range []string{filepath.Join(out, "new.json"), target} {
			if r := acpflow(t, dir, "export", id, "-o", p, "--state", state); r.code != 0 {
				t.Fatalf("%s: exit %d\n%s", p, r.code, r.stderr)
			}
			if got := readFile(t, p); got != want {
				t.Errorf("%s holds %d bytes, want the %d of the export", p, len(got), len(want))
			}
			if st, _ := os.Lstat(p); !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want a regular file 0600", p, st.Mode())
			}
		}
	})
}

// TestReplayFromWhatIsNotARegularFile: the class of input is a from: that
// names something other than a transcript file: /dev/zero, a named pipe
// beside the workflow, a directory, a FILE/STEP whose FILE is a device, a
// missing absolute path. Each is exit 2 before anything starts, saying
// what the path is (never "no run or batch"), and nothing blocks.
func TestReplayFromWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o600)
	os.Mkdir(filepath.Join(dir, "fixtures"), 0o755)
	for _, c := range []struct{ from, want string }{
		{"/dev/zero", "agent r: from: /dev/zero: not a transcript file: a character device"},
		{"/dev/zero/review", "agent r: from: /dev/zero/review: not a transcript file: /dev/zero is a character device"},
		{"pipe.json", "agent r: from: " + filepath.Join(dir, "pipe.json") + ": not a transcript file: a named pipe"},
		{"fixtures", "agent r: from: " + filepath.Join(dir, "fixtures") + ": not a transcript file: a directory"},
		{"/nonexistent/run.json", "agent r: from: /nonexistent/run.json: no such transcript file"},
	} {
		t.Run(c.from, func(t *testing.T) {
			wf := writeWorkflow(t, dir, `name: review
agents:
  r: {builtin: replay, from: `+c.from+`}
steps:
  - {id: review, uses: acp-subagent, with: {agent: r, prompt: hi}}
`)
			r := acpflow(t, dir, "run", wf, "--state", filepath.Join(dir, "state.db"))
			if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "no run or batch") || strings.Contains(r.stdout, "started") {
				t.Errorf("exit %d, want 2 and %q:\n%s%s", r.code, c.want, r.stdout, r.stderr)
			}
		})
	}
	t.Run("acpflow agent replay of a named pipe", func(t *testing.T) {
		p := filepath.Join(dir, "pipe.json")
		r := acpflow(t, dir, "agent", "replay", p, "review")
		if want := p + ": not a transcript file: not a regular file (a named pipe)"; r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want an error %q\n%s", r.code, want, r.stderr)
		}
	})
}

// TestPolicyTestOfUnreadableTranscriptsExits2: the class of input is
// transcripts that cannot be read: a named pipe (refused at once, never
// waited on), /dev/zero, a directory, a file that is not JSON, a file
// whose last attempt is broken (nothing decided is printed before the
// error), and a corrupted transcript in the run store. Each exits 2, bad
// input, never 1, which says a decision changed.
func TestPolicyTestOfUnreadableTranscriptsExits2(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "allow.yaml")
	os.WriteFile(pol, []byte("permission: reject\n"), 0o644)
	fifo := filepath.Join(dir, "fifo.json")
	syscall.Mkfifo(fifo, 0o600)
	notJSON := filepath.Join(dir, "notes.json")
	os.WriteFile(notJSON, []byte("# not a transcript\n"), 0o644)
	good := readFile(t, policyTestFixture(t, "review.transcript.json"))
	brokenTail := filepath.Join(dir, "broken-tail.json")
	i := strings.LastIndex(good, "]")
	os.WriteFile(brokenTail, []byte(good[:i]+`, {"step": 7}]}`), 0o644)
	for _, c := range []struct{ name, path, want string }{
		{"a named pipe", fifo, fifo + ": not a transcript file: not a regular file (a named pipe)"},
		{"/dev/zero", "/dev/zero", "/dev/zero: not a transcript file: not a regular file (a character device)"},
		{"a directory", dir, dir + ": not a transcript file: not a regular file (a directory)"},
		{"a file that is not JSON", notJSON, notJSON + ": not a transcript file: want a JSON object"},
		{"a file whose last attempt is broken", brokenTail, brokenTail + ": not a transcript file: the step attempt at byte"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := acpflow(t, dir, "policy", "test", pol, "--transcripts", c.path)
			if r.code != 2 || !strings.Contains(r.stderr, "--transcripts: "+c.want) {
				t.Errorf("exit %d, want 2 and %q\n%s%s", r.code, c.want, r.stdout, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("decisions were printed before the error:\n%s", r.stdout)
			}
		})
	}

	t.Run("a corrupted transcript in the run store", func(t *testing.T) {
		state := filepath.Join(dir, "state.db")
		id, _ := recordHello(t, dir, state)
		db, err := sql.Open("sqlite", state)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE transcripts SET messages_json = '[{"dir": "to_agent", ' WHERE run_id = ?`, id); err != nil {
			t.Fatal(err)
		}
		db.Close()
		r := acpflow(t, dir, "policy", "test", pol, "--runs", id, "--state", state)
		if want := "--runs: run " + id + ": "; r.code != 2 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "transcript") {
			t.Errorf("exit %d, want 2 and an error naming the run and its transcript\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestLargeTranscriptFilesAreReadInBoundedMemory: the class of input is a
// transcript file far larger than any of its attempts (issue 23: 150 MB
// cost 0.87 GB in replay, 0.57 GB in policy test). Here 160 attempts of
// 1 MiB: `policy test` decides all 160 requests and `agent replay` finds
// the last attempt, each with a peak resident set (measured by the kernel,
// not by time) under 160 MiB, where holding the file took several times
// the file.
func TestLargeTranscriptFilesAreReadInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 160 MiB file")
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.transcript.json")
	fh, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := transcripttest.Large(fh, dir, 160, 1<<20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if st, _ := os.Stat(big); st.Size() < 160<<20 {
		t.Fatalf("the file is %d bytes, want at least 160 MiB", st.Size())
	}
	pol := filepath.Join(dir, "allow.yaml")
	os.WriteFile(pol, []byte("permission: allow\n"), 0o644)
	const bound = 160 << 20 // bytes

	r, rss := runMeasured(t, dir, nil, "policy", "test", pol, "--transcripts", big)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "160 requests in 1 run: 0 changed, 160 unchanged\n") {
		t.Errorf("policy test: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if rss > bound {
		t.Errorf("policy test of a 160 MiB file peaked at %d MiB resident, want under %d", rss>>20, bound>>20)
	}
	t.Logf("policy test: %d MiB resident at most", rss>>20)

	r, rss = runMeasured(t, dir, nil, "agent", "replay", big, "work")
	if r.code != 0 {
		t.Errorf("agent replay: exit %d\n%s", r.code, r.stderr)
	}
	if rss > bound {
		t.Errorf("agent replay of a 160 MiB file peaked at %d MiB resident, want under %d", rss>>20, bound>>20)
	}
	t.Logf("agent replay: %d MiB resident at most", rss>>20)
}
