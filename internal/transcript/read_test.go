package transcript_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpflow/acpflow/decisions"
	"github.com/acpflow/acpflow/internal/transcript"
	"github.com/acpflow/acpflow/internal/transcript/transcripttest"
)

func sample() *transcript.File {
	one := 1
	return &transcript.File{RunID: "run-1", Workflow: "wf", Steps: []transcript.Step{
		{Step: "plan", Attempt: 1, Agent: "claude", Messages: []transcript.Message{
			{Dir: transcript.ToAgent, AtMS: 1, Msg: json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"deep":[[[{"a":1}]]]}}`)},
			{Dir: transcript.FromAgent, AtMS: 2, Msg: json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":{}}`)},
		}, Permissions: []decisions.Permission{{ToolCallID: "c1", Decision: decisions.Allow, Layer: decisions.LayerWorkflow}}},
		{Step: "each", Index: &one, Attempt: 2, Truncated: true, Messages: []transcript.Message{}},
	}}
}

func write(t testing.TB, f *transcript.File) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "t.json")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(fh); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	return p
}

// compact makes a step comparable: Write indents the messages' JSON.
func compact(s transcript.Step) transcript.Step {
	ms := make([]transcript.Message, len(s.Messages))
	for i, m := range s.Messages {
		var b bytes.Buffer
		json.Compact(&b, m.Msg)
		ms[i] = transcript.Message{Dir: m.Dir, AtMS: m.AtMS, Msg: b.Bytes()}
	}
	s.Messages = ms
	return s
}

func TestEachReadsWhatWriteWroteAStepAtATime(t *testing.T) {
	want := sample()
	r, err := transcript.Open(write(t, want))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []transcript.Step
	var at []int64
	h, err := r.Each(func(s *transcript.Step, pos int64) error {
		got = append(got, compact(*s))
		at = append(at, pos)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h != (transcript.Header{Format: transcript.Format, RunID: "run-1", Workflow: "wf"}) {
		t.Errorf("header = %+v", h)
	}
	if !reflect.DeepEqual(got, want.Steps) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want.Steps)
	}
	// Each again reads from the start; At reads one attempt by position.
	n := 0
	if _, err := r.Each(func(*transcript.Step, int64) error { n++; return nil }); err != nil || n != 2 {
		t.Errorf("a second Each: %d steps, %v", n, err)
	}
	for i := len(at) - 1; i >= 0; i-- {
		s, err := r.At(at[i])
		if err != nil || !reflect.DeepEqual(compact(*s), want.Steps[i]) {
			t.Errorf("At(%d) = %+v, %v; want step %d", at[i], s, err, i)
		}
	}
	// Each's own error comes back as it is, and stops the read.
	stop := errors.New("stop")
	n = 0
	if _, err := r.Each(func(*transcript.Step, int64) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Each with an error: %d steps, %v", n, err)
	}
}

// TestOpenRefusesWhatIsNotARegularFile: the class of input is a path to
// anything but a regular file (a named pipe with no writer, a symlink to
// one, a directory, a character device): refused at once, saying what it
// is, never read or waited on.
func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(fifo, link)
	for _, c := range []struct{ path, kind string }{
		{fifo, "a named pipe"}, {link, "a named pipe"}, {dir, "a directory"}, {"/dev/zero", "a character device"},
	} {
		done := make(chan error, 1)
		go func() {
			r, err := transcript.Open(c.path)
			if err == nil {
				r.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if want := c.path + ": not a transcript file: not a regular file (" + c.kind + ")"; err == nil || err.Error() != want {
				t.Errorf("Open(%s) = %v, want %q", c.path, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", c.path)
		}
	}
	if _, err := transcript.Open(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// endless is an input that never ends: prefix, then fill forever.
type endless struct {
	prefix []byte
	fill   byte
}

func (e *endless) Read(p []byte) (int, error) {
	n := copy(p, e.prefix)
	e.prefix = e.prefix[n:]
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	return len(p), nil
}

// TestDecodeRefusesWhatIsNotATranscript: the class of input is a file that
// is not a transcript of this acpflow: not JSON, not an object, another
// format (no step is handed out), a format after its steps (checked at the
// end), keys twice, steps that are no list, a file cut short, and input
// without end (blanks, a string, a step): each is an error that says what
// is wrong, and the endless ones end at the bound.
func TestDecodeRefusesWhatIsNotATranscript(t *testing.T) {
	format := `"format": "` + transcript.Format + `"`
	for _, c := range []struct {
		name  string
		in    io.Reader
		want  string
		steps int // handed to each before the error
	}{
		{"an empty file", strings.NewReader(""), "want a JSON object; the file ends at byte 0", 0},
		{"not JSON", strings.NewReader("hello"), "want a JSON object, at byte 0: invalid character 'h'", 0},
		{"a list", strings.NewReader("[]"), `want a JSON object, got "["`, 0},
		{"another format", strings.NewReader(`{"format": "other/1", "steps": [{"step": "a"}]}`), `not a transcript file of this acpflow (format "other/1", want "acpflow-transcript/1")`, 0},
		{"no format", strings.NewReader(`{"steps": []}`), `(format "", want`, 0},
		{"another format after the steps", strings.NewReader(`{"steps": [{"step": "a"}], "format": "other/1"}`), `format "other/1"`, 1},
		{"format twice", strings.NewReader(`{` + format + `, ` + format + `}`), `the key "format" appears twice`, 0},
		{"steps that are a string", strings.NewReader(`{` + format + `, "steps": "a"}`), "steps: want a list, got a string", 0},
		{"a step that is not one", strings.NewReader(`{` + format + `, "steps": [{"step": 3}]}`), "the step attempt at byte 45: json: cannot unmarshal number", 0},
		{"a file cut in a step", strings.NewReader(`{` + format + `, "steps": [{"step": "a"}, {"step": "b", "messages": [`), "the file ends inside it", 1},
		{"a file cut after a step", strings.NewReader(`{` + format + `, "steps": [{"step": "a"}`), "steps: want the end of the list; the file ends", 1},
		{"endless blanks", &endless{prefix: []byte(`{` + format + `,`), fill: ' '}, "found more than 64 MiB without one", 0},
		{"an endless string", &endless{prefix: []byte(`{"run_id": "`), fill: 'a'}, "run_id is over 64 MiB", 0},
		{"an endless step", &endless{prefix: []byte(`{` + format + `, "steps": [{"step": "a"}, {"step": "`), fill: 'a'}, "the step attempt at byte 58 is over 64 MiB", 1},
		{"zeros (/dev/zero's bytes in a file)", &endless{fill: 0}, "invalid character '\\x00'", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 0
			_, err := transcript.Decode(c.in, func(*transcript.Step, int64) error { n++; return nil })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if n != c.steps {
				t.Errorf("%d steps handed out, want %d", n, c.steps)
			}
		})
	}
}

// TestEachHoldsOneAttemptAtATime: the class of input is a transcript file
// far larger than any one of its attempts (here 48 attempts of 1 MiB). The
// live heap, measured after a collection while each attempt is handed out,
// stays under a bound set by one attempt, not by the file: a reader that
// held the file would pass it by the file's size.
func TestEachHoldsOneAttemptAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 48 MiB file")
	}
	p := filepath.Join(t.TempDir(), "large.json")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := transcripttest.Large(fh, "/ws", 48, 1<<20); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if st, _ := os.Stat(p); st.Size() < 48<<20 {
		t.Fatalf("the file is %d bytes, want at least 48 MiB", st.Size())
	}
	peak := livePeak(t, func(sample func()) {
		r, err := transcript.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		n := 0
		if _, err := r.Each(func(s *transcript.Step, _ int64) error {
			n++
			sample()
			runtime.KeepAlive(s) // measured while the attempt is held
			return nil
		}); err != nil || n != 48 {
			t.Fatalf("%d attempts, %v", n, err)
		}
	})
	if peak > 16<<20 {
		t.Errorf("the live heap grew by %d MiB while reading a 48 MiB file a step at a time; want under 16 MiB", peak>>20)
	}
}

// livePeak runs f, which calls sample where the heap is to be measured,
// and returns the largest growth of the live heap (after a collection)
// over what it was before f.
func livePeak(t *testing.T, f func(sample func())) uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, uint64(0)
	f(func() {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base && ms.HeapAlloc-base > peak {
			peak = ms.HeapAlloc - base
		}
	})
	return peak
}

// FuzzDecode: any input is read to an error or to its end, without a
// panic, and what it hands out is written back as the same steps.
func FuzzDecode(f *testing.F) {
	var b bytes.Buffer
	sample().Write(&b)
	f.Add(b.Bytes())
	f.Add([]byte(`{"format": "acpflow-transcript/1", "steps": null}`))
	f.Add([]byte(`{"steps": [{"step": "a", "permissions": [{"layer": ""}]}], "format": "acpflow-transcript/1", "x": [1, {"y": null}]}`))
	f.Add([]byte(`{"format": "acpflow-transcript/1", "steps": [{"step": "a", "index": 2, "messages": [{"dir": "to_agent", "msg": "not an object"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []transcript.Step
		_, err := transcript.Decode(bytes.NewReader(data), func(s *transcript.Step, at int64) error {
			if at < 0 || at > int64(len(data)) {
				t.Fatalf("position %d out of the input's %d bytes", at, len(data))
			}
			got = append(got, *s)
			return nil
		})
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := (&transcript.File{Steps: got}).Write(&out); err != nil {
			t.Fatalf("a decoded file does not write: %v", err)
		}
		n := 0
		if _, err := transcript.Decode(&out, func(*transcript.Step, int64) error { n++; return nil }); err != nil || n != len(got) {
			t.Fatalf("written back: %d steps, %v; want %d", n, err, len(got))
		}
	})
}

// TestWriteKeepsADeeplyNestedMessageCompact: the class of input is an
// agent's message nested as deep as JSON decoders take (9000 levels).
// Indented, 18 KB became 162 MB, past what a reader takes; written as it
// went over the wire, the file stays the size of the message and reads
// back.
func TestWriteKeepsADeeplyNestedMessageCompact(t *testing.T) {
	const depth = 9000
	msg := `{"jsonrpc":"2.0","method":"session/update","params":{"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}`
	f := &transcript.File{RunID: "r", Steps: []transcript.Step{{Step: "s", Attempt: 1, Messages: []transcript.Message{{Dir: transcript.FromAgent, Msg: json.RawMessage(msg)}}}}}
	var b bytes.Buffer
	if err := f.Write(&b); err != nil {
		t.Fatal(err)
	}
	if b.Len() > len(msg)+1024 {
		t.Errorf("a %d-byte message made a %d-byte file", len(msg), b.Len())
	}
	var got []transcript.Step
	if _, err := transcript.Decode(&b, func(s *transcript.Step, _ int64) error { got = append(got, *s); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got[0].Messages[0].Msg) != msg {
		t.Errorf("read back %d steps, the message changed", len(got))
	}
}
