package acpsubagent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/steps"
)

// pngHead is the start of a PNG file: enough for a file to be one.
const pngHead = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"

// workspace makes a workspace with files (path → contents) in it.
func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	ws := t.TempDir()
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

func attachList(paths ...string) map[string]any {
	l := make([]any, len(paths))
	for i, p := range paths {
		l[i] = p
	}
	return map[string]any{"attach": l}
}

func TestAttachmentsAreFoundInTheWorkspace(t *testing.T) {
	ws := workspace(t, map[string]string{"README.md": "# hi\n", "sub/notes.txt": "notes", "shot.png": pngHead, "fake.png": "not an image", "data.bin": "\x00\x01"})
	if err := os.Symlink("README.md", filepath.Join(ws, "link.md")); err != nil {
		t.Fatal(err)
	}
	files, err := attachments(attachList("README.md", "sub/../sub/notes.txt", filepath.Join(ws, "shot.png"), "fake.png", "link.md", "data.bin"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	for i, want := range []attachment{
		{path: "README.md", abs: filepath.Join(ws, "README.md"), size: 5, mimeType: "text/markdown"},
		{path: "sub/../sub/notes.txt", abs: filepath.Join(ws, "sub", "notes.txt"), size: 5, mimeType: "text/plain"},
		{path: filepath.Join(ws, "shot.png"), abs: filepath.Join(ws, "shot.png"), size: int64(len(pngHead)), mimeType: "image/png", image: true, binary: true},
		// The extension says png, the bytes do not: no image, no type.
		{path: "fake.png", abs: filepath.Join(ws, "fake.png"), size: 12},
		{path: "link.md", abs: filepath.Join(ws, "README.md"), size: 5, mimeType: "text/markdown"},
		{path: "data.bin", abs: filepath.Join(ws, "data.bin"), size: 2, binary: true},
	} {
		got := files[i]
		if got.file == nil {
			t.Errorf("attachment %d was not opened", i)
		}
		got.file = nil
		if got != want {
			t.Errorf("attachment %d = %+v, want %+v", i, got, want)
		}
	}
	if files, err := attachments(map[string]any{}, ws); err != nil || files != nil {
		t.Errorf("no attach: %v, %v; want nothing", files, err)
	}
}

// TestAttachmentsThroughASymlinkedWorkspace: a workspace reached through a
// symlink (/tmp on macOS, a bind-mounted home) holds its files as any
// other: inside is judged on resolved paths.
func TestAttachmentsThroughASymlinkedWorkspace(t *testing.T) {
	real := workspace(t, map[string]string{"a.md": "a"})
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, ws); err != nil {
		t.Fatal(err)
	}
	files, err := attachments(attachList("a.md", filepath.Join(ws, "a.md")), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	for _, f := range files {
		if f.abs != filepath.Join(real, "a.md") {
			t.Errorf("abs = %s, want the resolved %s", f.abs, filepath.Join(real, "a.md"))
		}
	}
}

func TestAttachmentsThatFailTheStep(t *testing.T) {
	ws := workspace(t, map[string]string{"a.md": "a", "sub/b.md": "b"})
	outside := workspace(t, map[string]string{"secret.txt": "s"})
	for _, link := range []struct{ name, to string }{
		{"out.md", filepath.Join(outside, "secret.txt")},
		{"outdir", outside},
		{"dangling.md", filepath.Join(ws, "gone.md")},
		{"loop.md", "loop.md"},
	} {
		if err := os.Symlink(link.to, filepath.Join(ws, link.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = "a.md"
	}
	for _, tc := range []struct {
		name string
		with map[string]any
		want string
	}{
		{"a missing file", attachList("a.md", "docs/missing.md"), "with.attach: docs/missing.md does not exist (" + filepath.Join(ws, "docs", "missing.md") + ")"},
		{"a directory", attachList("sub"), "with.attach: sub is a directory; attach the files in it"},
		{"the workspace itself", attachList("."), "with.attach: . is a directory"},
		{"a relative path out of the workspace", attachList("../" + filepath.Base(outside) + "/secret.txt"), "with.attach: ../" + filepath.Base(outside) + "/secret.txt is outside the workspace " + ws},
		{"an absolute path outside", attachList("/etc/hostname"), "with.attach: /etc/hostname is outside the workspace"},
		{"a missing path outside (not even looked at)", attachList("/nonexistent/x.md"), "with.attach: /nonexistent/x.md is outside the workspace"},
		{"a symlink that leads out", attachList("out.md"), "with.attach: out.md is outside the workspace " + ws + " (it resolves to " + filepath.Join(outside, "secret.txt") + ")"},
		{"a file under a symlinked directory that leads out", attachList("outdir/secret.txt"), "with.attach: outdir/secret.txt is outside the workspace"},
		{"a dangling symlink", attachList("dangling.md"), "with.attach: dangling.md does not exist"},
		{"a symlink loop", attachList("loop.md"), "with.attach: loop.md cannot be read: too many links"},
		{"a named pipe", attachList("pipe"), "with.attach: pipe is not a regular file (a named pipe)"},
		{"an empty path", attachList("a.md", ""), "with.attach[1]: the path is empty"},
		{"a path that is not a string", map[string]any{"attach": []any{"a.md", 3}}, "with.attach[1]: want a path (a string), got 3"},
		{"a path instead of a list", map[string]any{"attach": "a.md"}, "with.attach: want a list of paths"},
		{"101 files", attachList(many...), "with.attach: at most 100 files, got 101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := attachments(tc.with, ws)
			if err == nil {
				t.Fatalf("accepted: %+v", files)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	if err := os.Chmod(filepath.Join(ws, "a.md"), 0); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if _, err := attachments(attachList("a.md"), ws); err == nil || !strings.Contains(err.Error(), "with.attach: a.md cannot be read: permission denied") {
			t.Errorf("an unreadable file: %v", err)
		}
	}
}

// blockJSON is a content block as the agent reads it.
func blockJSON(t *testing.T, b acp.ContentBlock) map[string]any {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPromptBlocksFollowWhatTheAgentAdvertised(t *testing.T) {
	ws := workspace(t, map[string]string{
		"a.md": "# plan\n", "shot.png": pngHead, "data.bin": "\x00\x01\x02", "latin1.txt": "caf\xe9",
		"big.txt": strings.Repeat("x", maxEmbeddedText+1), "my notes.txt": "n",
	})
	files, err := attachments(attachList("a.md", "shot.png", "data.bin", "latin1.txt", "big.txt", "my notes.txt"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	uri := func(name string) string { return "file://" + filepath.Join(ws, name) }
	link := func(name, mime string, size int) string {
		if mime != "" {
			return fmt.Sprintf(`{"mimeType":%q,"name":%q,"size":%d,"type":"resource_link","uri":%q}`, mime, name, size, uri(name))
		}
		return fmt.Sprintf(`{"name":%q,"size":%d,"type":"resource_link","uri":%q}`, name, size, uri(name))
	}
	spaced := fmt.Sprintf(`{"mimeType":"text/plain","name":"my notes.txt","size":1,"type":"resource_link","uri":%q}`, "file://"+strings.ReplaceAll(filepath.Join(ws, "my notes.txt"), " ", "%20"))
	embedded := func(name, mime, text string) string {
		return fmt.Sprintf(`{"resource":{"mimeType":%q,"text":%q,"uri":%q},"type":"resource"}`, mime, text, uri(name))
	}
	image := fmt.Sprintf(`{"data":%q,"mimeType":"image/png","type":"image","uri":%q}`, base64.StdEncoding.EncodeToString([]byte(pngHead)), uri("shot.png"))
	links := []string{link("a.md", "text/markdown", 7), link("shot.png", "image/png", len(pngHead)), link("data.bin", "", 3), link("latin1.txt", "text/plain", 4), link("big.txt", "text/plain", maxEmbeddedText+1), spaced}
	for _, tc := range []struct {
		name string
		caps acp.PromptCapabilities
		want []string // the blocks after the text, as JSON
	}{
		{"an agent that advertises nothing gets links", acp.PromptCapabilities{}, links},
		{"embedded context embeds the UTF-8 text files up to 1 MiB", acp.PromptCapabilities{EmbeddedContext: true},
			[]string{embedded("a.md", "text/markdown", "# plan\n"), links[1], links[2], links[3], links[4], strings.Replace(embedded("my notes.txt", "text/plain", "n"), " ", "%20", 1)}},
		{"image sends the png as an image", acp.PromptCapabilities{Image: true}, []string{links[0], image, links[2], links[3], links[4], links[5]}},
		{"audio alone changes nothing", acp.PromptCapabilities{Audio: true}, links},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, err := promptBlocks("do it", files, tc.caps)
			if err != nil {
				t.Fatal(err)
			}
			if len(blocks) != 1+len(files) {
				t.Fatalf("%d blocks, want the text and %d", len(blocks), len(files))
			}
			if b := blockJSON(t, blocks[0]); b["type"] != "text" || b["text"] != "do it" {
				t.Errorf("first block = %v, want the prompt's text", b)
			}
			for i, want := range tc.want {
				got, _ := json.Marshal(blocks[i+1])
				if string(got) != want {
					t.Errorf("block %d =\n%s\nwant\n%s", i+1, got, want)
				}
			}
		})
	}
}

// TestPromptBlocksEmbedAtMostTenMiB: past 10 MiB embedded in all, files
// are linked, so that the prompt stays one line an agent can read.
func TestPromptBlocksEmbedAtMostTenMiB(t *testing.T) {
	body := strings.Repeat("y", maxEmbeddedText)
	names := map[string]string{}
	var paths []string
	for i := range 11 {
		name := fmt.Sprintf("f%02d.txt", i)
		names[name] = body
		paths = append(paths, name)
	}
	img := pngHead + strings.Repeat("\x00", 100)
	names["late.png"] = img
	paths = append(paths, "late.png")
	ws := workspace(t, names)
	files, err := attachments(attachList(paths...), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	blocks, err := promptBlocks("x", files, acp.PromptCapabilities{EmbeddedContext: true, Image: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	total := 0
	for _, b := range blocks[1:] {
		switch {
		case b.Resource != nil:
			kinds = append(kinds, "resource")
			total += len(b.Resource.Resource.TextResourceContents.Text)
		case b.Image != nil:
			kinds = append(kinds, "image")
		case b.ResourceLink != nil:
			kinds = append(kinds, "link")
		}
	}
	want := strings.Repeat("resource ", 10) + "link link"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("blocks: %s\nwant %s", got, want)
	}
	if total > maxEmbedded {
		t.Errorf("%d bytes embedded, over %d", total, maxEmbedded)
	}
}

// TestPromptBlocksEmbedTheFileFoundEvenIfItIsGoneSince: the prompt reads
// the file opened when it was found, so a file removed since is embedded as
// it was found (and linked, the agent finds it gone itself).
func TestPromptBlocksEmbedTheFileFoundEvenIfItIsGoneSince(t *testing.T) {
	ws := workspace(t, map[string]string{"a.md": "a"})
	files, err := attachments(attachList("a.md"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	if err := os.Remove(filepath.Join(ws, "a.md")); err != nil {
		t.Fatal(err)
	}
	if blocks, err := promptBlocks("x", files, acp.PromptCapabilities{}); err != nil || blocks[1].ResourceLink == nil {
		t.Errorf("a link to a removed file: %+v, %v", blocks, err)
	}
	blocks, err := promptBlocks("x", files, acp.PromptCapabilities{EmbeddedContext: true})
	if err != nil || blocks[1].Resource == nil || blocks[1].Resource.Resource.TextResourceContents.Text != "a" {
		t.Errorf("embedding a removed file: %+v, %v; want its text as found", blocks, err)
	}
}

// TestPromptBlocksLinkAFileThatGrewPastItsBound: a file found small and
// grown past what may be embedded is linked, not cut.
func TestPromptBlocksLinkAFileThatGrewPastItsBound(t *testing.T) {
	ws := workspace(t, map[string]string{"a.md": "a"})
	files, err := attachments(attachList("a.md"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	if err := os.WriteFile(filepath.Join(ws, "a.md"), bytes.Repeat([]byte("a"), maxEmbeddedText+1), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := promptBlocks("x", files, acp.PromptCapabilities{EmbeddedContext: true})
	if err != nil || blocks[1].ResourceLink == nil {
		t.Errorf("blocks %+v, %v; want a link", blocks, err)
	}
}

// swaps are the ways a path checked inside the workspace can be made to
// name something else before it is read (issue 23): name → the shell
// command that swaps ws/notes.md (or ws/docs, its parent), run in the
// workspace's parent with $OUT the directory outside. Each keeps the
// original file alive under another name, as an attacker need not.
var swaps = []struct {
	name, sh string
	// mknod: the swap makes a device node, which needs CAP_MKNOD.
	mknod bool
}{
	{name: "a symlink to a file outside, renamed over the file", sh: `ln -s "$OUT/secret.txt" ws/t && mv -T ws/t ws/docs/notes.md`},
	{name: "the parent directory swapped for a symlink to a directory outside", sh: `mv ws/docs ws/docs.old && ln -s "$OUT" ws/docs && ln -s secret.txt "$OUT/notes.md"`},
	{name: "a named pipe renamed over the file", sh: `mkfifo ws/t && mv -T ws/t ws/docs/notes.md`},
	{name: "a device renamed over the file", sh: `mknod ws/t c 1 5 && mv -T ws/t ws/docs/notes.md`, mknod: true},
}

// swapWorkspace is a workspace holding docs/notes.md, beside a directory
// outside it holding secret.txt.
func swapWorkspace(t *testing.T) (ws, out string) {
	t.Helper()
	parent := t.TempDir()
	ws, out = filepath.Join(parent, "ws"), filepath.Join(parent, "outside")
	for _, d := range []string{filepath.Join(ws, "docs"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "docs", "notes.md"), []byte("the notes in the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "secret.txt"), []byte(secretOutside), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws, out
}

const secretOutside = "KEY-outside-the-workspace-5521"

// swap runs a swap's shell command for the workspace ws; false when the
// system does not allow it (a device node without CAP_MKNOD).
func swap(t *testing.T, sh, ws, out string) bool {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", sh)
	cmd.Dir = filepath.Dir(ws)
	cmd.Env = append(os.Environ(), "OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(b), "mknod") {
			return false
		}
		t.Fatalf("%s: %v\n%s", sh, err, b)
	}
	return true
}

// TestAttachmentsSwappedBetweenCheckAndOpen: the class of input is a path
// swapped in the window between its check (symlinks resolved, inside the
// workspace) and its open: a symlink to a file outside, a parent directory
// made a symlink out, a named pipe, a device. The open is beneath the
// workspace and checks what it opened: each fails the step, naming the
// path, and nothing hangs on the pipe.
func TestAttachmentsSwappedBetweenCheckAndOpen(t *testing.T) {
	wants := map[string]string{
		swaps[0].name: "with.attach: docs/notes.md is outside the workspace",
		swaps[1].name: "with.attach: docs/notes.md is outside the workspace",
		swaps[2].name: "with.attach: docs/notes.md is not a regular file (a named pipe)",
		swaps[3].name: "with.attach: docs/notes.md is not a regular file (a character device)",
	}
	for _, sw := range swaps {
		t.Run(sw.name, func(t *testing.T) {
			ws, out := swapWorkspace(t)
			swapped := true
			testHookOpen = func(string) { swapped = swap(t, sw.sh, ws, out) }
			defer func() { testHookOpen = nil }()
			files, err := attachments(attachList("docs/notes.md"), ws)
			closeAttachments(files)
			if !swapped {
				t.Skip("mknod is not allowed here")
			}
			if err == nil || !strings.Contains(err.Error(), wants[sw.name]) {
				t.Errorf("error %v, want %q", err, wants[sw.name])
			}
			if err != nil && strings.Contains(err.Error(), secretOutside) {
				t.Errorf("the error holds the file outside: %v", err)
			}
		})
	}
}

// TestAttachmentsSwappedAfterTheyWereOpened: the class of input is a path
// swapped after it was opened and before the prompt is built (while the
// agent starts): every swap of swaps, and the file grown past what may be
// embedded. The prompt embeds the file as it was opened, never what the
// path names now; a file grown past the bound is linked.
func TestAttachmentsSwappedAfterTheyWereOpened(t *testing.T) {
	for _, sw := range swaps {
		t.Run(sw.name, func(t *testing.T) {
			ws, out := swapWorkspace(t)
			files, err := attachments(attachList("docs/notes.md"), ws)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAttachments(files)
			if !swap(t, sw.sh, ws, out) {
				t.Skip("mknod is not allowed here")
			}
			blocks, err := promptBlocks("x", files, acp.PromptCapabilities{EmbeddedContext: true})
			if err != nil || blocks[1].Resource == nil {
				t.Fatalf("blocks %+v, %v; want the file embedded", blocks, err)
			}
			if text := blocks[1].Resource.Resource.TextResourceContents.Text; text != "the notes in the workspace\n" {
				t.Errorf("embedded %q, want the file as it was opened", text)
			}
		})
	}
	t.Run("the file grown past the bound", func(t *testing.T) {
		ws, _ := swapWorkspace(t)
		files, err := attachments(attachList("docs/notes.md"), ws)
		if err != nil {
			t.Fatal(err)
		}
		defer closeAttachments(files)
		fh, err := os.OpenFile(filepath.Join(ws, "docs", "notes.md"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(bytes.Repeat([]byte("x"), maxEmbeddedText))
		fh.Close()
		blocks, err := promptBlocks("x", files, acp.PromptCapabilities{EmbeddedContext: true})
		if err != nil || blocks[1].ResourceLink == nil {
			t.Errorf("blocks %+v, %v; want a link", blocks, err)
		}
	})
}

// TestAttachmentsTakeAHardLink: the class of input is a hard link in the
// workspace to a file that has another name outside it. It is taken, as
// decided (DESIGN.md): a hard link is the file itself, not a pointer
// elsewhere; making one needs the right to read and write the file
// (fs.protected_hardlinks), and a sandboxed agent cannot link in a file it
// may not read (Landlock's refer right).
func TestAttachmentsTakeAHardLink(t *testing.T) {
	ws, out := swapWorkspace(t)
	if err := os.Link(filepath.Join(out, "secret.txt"), filepath.Join(ws, "linked.txt")); err != nil {
		t.Skip("no hard links here:", err)
	}
	files, err := attachments(attachList("linked.txt"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAttachments(files)
	if files[0].abs != filepath.Join(ws, "linked.txt") {
		t.Errorf("abs = %s, want the name in the workspace", files[0].abs)
	}
}

// TestAttachmentsSwappedWhileTheAgentStarts: the class of input is an
// agent that swaps an attached path as it starts, after acpflow checked the
// file and before the prompt is built (issue 23's `ln -s /outside/key t &&
// mv -T t ws/notes.md` while the agent initialises), for every swap of
// swaps and a file grown past the embedding bound. The agent is the
// scripted one, started by a shell that swaps first: the prompt it
// receives holds the file as acpflow opened it (or a link, for the grown
// one), never the file outside, and the step succeeds.
func TestAttachmentsSwappedWhileTheAgentStarts(t *testing.T) {
	type swapCase struct {
		name, sh     string
		mknod, grown bool
	}
	var cases []swapCase
	for _, sw := range swaps {
		cases = append(cases, swapCase{name: sw.name, sh: sw.sh, mknod: sw.mknod})
	}
	cases = append(cases, swapCase{name: "the file grown past the bound", sh: `head -c 2000000 /dev/zero | tr '\0' x >> ws/docs/notes.md`, grown: true})
	for _, sw := range cases {
		t.Run(sw.name, func(t *testing.T) {
			if sw.mknod && !canMknod(t) {
				t.Skip("mknod is not allowed here")
			}
			ws, out := swapWorkspace(t)
			h := newHarness(t, "-prompt-capabilities", "embeddedContext")
			h.workspace = ws
			h.with["attach"] = []any{"docs/notes.md"}
			script := "cd '" + filepath.Dir(ws) + "' && OUT='" + out + "' && " + sw.sh + ` && exec "$0" "$@"`
			h.agent.Args = append([]string{"-c", script, testAgent}, h.agent.Args...)
			h.agent.Command = "/bin/sh"
			res := h.run(context.Background())
			if res.Err != nil || res.StopReason != steps.Completed {
				t.Fatalf("step: %v %v", res.StopReason, res.Err)
			}
			prompts := h.recorded("prompt")
			if len(prompts) != 1 {
				t.Fatalf("%d prompts recorded, want 1", len(prompts))
			}
			raw, _ := json.Marshal(prompts[0]["params"])
			if strings.Contains(string(raw), secretOutside) {
				t.Fatalf("the agent was sent the file outside the workspace:\n%s", raw)
			}
			blocks, _ := prompts[0]["params"].(map[string]any)["prompt"].([]any)
			if len(blocks) != 2 {
				t.Fatalf("prompt blocks %s, want the text and the file", raw)
			}
			b, _ := blocks[1].(map[string]any)
			if sw.grown {
				if b["type"] != "resource_link" {
					t.Errorf("the grown file's block is %v, want a link", b)
				}
				return
			}
			resource, _ := b["resource"].(map[string]any)
			if b["type"] != "resource" || resource["text"] != "the notes in the workspace\n" {
				t.Errorf("the file's block is %v, want the file as acpflow opened it", b)
			}
		})
	}
}

// canMknod reports whether this process may make a device node.
func canMknod(t *testing.T) bool {
	p := filepath.Join(t.TempDir(), "dev")
	return syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|5) == nil
}
