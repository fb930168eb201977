package acpsubagent

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acpflow/acpflow/internal/regularfile"
	"github.com/acpflow/acpflow/steps"
)

// Bounds of with.attach. Every file is a block of the one session/prompt
// request, which the agent reads as one JSON line (the SDK's limit is
// 10 MiB, and a base64 image grows by a third), so what is embedded is
// bounded in total and the rest is linked.
const (
	maxAttachments = 100
	// maxEmbeddedText is the largest text file embedded; a larger one is
	// linked.
	maxEmbeddedText = 1 << 20
	// maxEmbedded bounds the bytes of every file embedded in one prompt,
	// texts and images together; past it, files are linked.
	maxEmbedded = 10 << 20
	// sniffBytes is how much of a file is read before the spawn, to know
	// an image or a binary file.
	sniffBytes = 512
)

// attachment is one file of with.attach, found in the workspace and opened
// before the agent is spawned.
type attachment struct {
	path     string // as with.attach gives it, for errors
	abs      string // absolute, symlinks resolved, inside the workspace
	size     int64
	mimeType string // "" when not known
	image    bool   // png, jpeg, gif or webp, by its first bytes
	binary   bool   // a NUL in its first bytes: never embedded as text
	// file is the file as it was opened and checked; the prompt reads it,
	// never the path again, so that a path swapped since (a symlink to a
	// file outside, a named pipe) sends nothing else. closeAttachments
	// closes it.
	file *os.File
}

// testHookOpen, when set (by tests), runs between the check of a path and
// its open: the window a swap must hit to be refused there.
var testHookOpen func(real string)

// checkAttach checks the shape of with.attach at validate time: a list of
// at most maxAttachments paths (strings, templates allowed).
func checkAttach(with map[string]any) error {
	v, ok := with["attach"]
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return steps.FieldErrorf(steps.WithPath("attach"), "with.attach: want a list of paths in the workspace, such as [README.md, docs/plan.md], got %s", steps.Describe(v))
	}
	if len(list) > maxAttachments {
		return steps.FieldErrorf(steps.WithPath("attach"), "with.attach: at most %d files, got %d", maxAttachments, len(list))
	}
	for i, item := range list {
		s, ok := item.(string)
		if !ok {
			return steps.FieldErrorf(steps.WithPath("attach", strconv.Itoa(i)), "with.attach[%d]: want a path (a string), got %s", i, steps.Describe(item))
		}
		if s == "" {
			return steps.FieldErrorf(steps.WithPath("attach", strconv.Itoa(i)), "with.attach[%d]: the path is empty", i)
		}
	}
	return nil
}

// attachments resolves with.attach (already rendered) against the
// workspace and opens each file; fails on a missing file, a directory,
// anything but a regular file, or a path outside it. It runs before the
// agent is spawned, so that a step that cannot send its files starts
// nothing. The caller closes the files (closeAttachments) once the prompt
// is built.
//
// # Notes
//
// A relative path is relative to the workspace, never to the step's cwd
// or acpflow's own directory. An absolute path is allowed if it is inside
// the workspace. Inside is judged twice: on the path as written (so that
// nothing outside is even looked at) and once every symlink is resolved
// (so that a link cannot lead out). The resolved path is then opened
// beneath the workspace (os.Root: no component may lead out, whatever was
// swapped in since), checked as opened (fstat), and only that open file is
// read, here and when the prompt is built. A hard link is the file itself,
// not a pointer elsewhere, and is taken (DESIGN.md).
func attachments(with map[string]any, workspace string) ([]attachment, error) {
	var paths []string
	switch v := with["attach"].(type) {
	case nil:
		return nil, nil
	case []string:
		paths = v
	case []any:
		for i, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, fmt.Errorf("with.attach[%d]: want a path (a string), got %s", i, steps.Describe(item))
			}
			paths = append(paths, s)
		}
	default:
		return nil, fmt.Errorf("with.attach: want a list of paths in the workspace, got %s", steps.Describe(v))
	}
	if len(paths) > maxAttachments {
		return nil, fmt.Errorf("with.attach: at most %d files, got %d", maxAttachments, len(paths))
	}
	if len(paths) == 0 {
		return nil, nil
	}
	root, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return nil, fmt.Errorf("with.attach: the workspace %s cannot be resolved: %w", workspace, err)
	}
	for i, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("with.attach[%d]: the path is empty", i)
		}
	}
	dir, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("with.attach: the workspace %s cannot be opened: %v", workspace, pathErrorCause(err))
	}
	defer dir.Close()
	files := make([]attachment, 0, len(paths))
	for _, p := range paths {
		f, err := resolveAttachment(p, workspace, root, dir)
		if err != nil {
			closeAttachments(files)
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// closeAttachments closes the files attachments opened; closing them
// again does nothing.
func closeAttachments(files []attachment) {
	for _, f := range files {
		if f.file != nil {
			f.file.Close()
		}
	}
}

// resolveAttachment finds one file of with.attach in the workspace
// (workspace as given, root with its symlinks resolved, dir the root
// opened), opens it and reads its first bytes.
func resolveAttachment(p, workspace, root string, dir *os.Root) (attachment, error) {
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(workspace, abs)
	}
	abs = filepath.Clean(abs)
	if !within(workspace, abs) && !within(root, abs) {
		return attachment{}, fmt.Errorf("with.attach: %s is outside the workspace %s", p, workspace)
	}
	real, err := filepath.EvalSymlinks(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return attachment{}, fmt.Errorf("with.attach: %s does not exist (%s)", p, abs)
	case err != nil:
		return attachment{}, fmt.Errorf("with.attach: %s cannot be read: %v", p, pathErrorCause(err))
	case !within(root, real):
		return attachment{}, fmt.Errorf("with.attach: %s is outside the workspace %s (it resolves to %s)", p, workspace, real)
	}
	rel, err := filepath.Rel(root, real)
	if err != nil {
		return attachment{}, fmt.Errorf("with.attach: %s cannot be read: %v", p, err)
	}
	if testHookOpen != nil {
		testHookOpen(real)
	}
	// Beneath the workspace, each component opened without following a
	// symlink out of it; O_NONBLOCK: a named pipe swapped in must not hang
	// the open, it is refused below.
	f, err := dir.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if now, rerr := filepath.EvalSymlinks(abs); rerr == nil && !within(root, now) {
			return attachment{}, fmt.Errorf("with.attach: %s is outside the workspace %s (it resolves to %s now)", p, workspace, now)
		}
		return attachment{}, fmt.Errorf("with.attach: %s cannot be read: %v", p, pathErrorCause(err))
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	st, err := f.Stat()
	switch {
	case err != nil:
		return attachment{}, fmt.Errorf("with.attach: %s cannot be read: %v", p, pathErrorCause(err))
	case st.IsDir():
		return attachment{}, fmt.Errorf("with.attach: %s is a directory; attach the files in it", p)
	case !st.Mode().IsRegular():
		return attachment{}, fmt.Errorf("with.attach: %s is not a regular file (%s)", p, regularfile.Kind(st.Mode()))
	}
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return attachment{}, fmt.Errorf("with.attach: %s cannot be read: %v", p, pathErrorCause(err))
	}
	head = head[:n]
	a := attachment{path: p, abs: real, size: st.Size(), binary: bytes.IndexByte(head, 0) >= 0, file: f}
	if m := imageType(head); m != "" {
		a.mimeType, a.image = m, true
	} else {
		a.mimeType = mimeTypes[strings.ToLower(filepath.Ext(real))]
	}
	keep = true
	return a, nil
}

// within reports whether path is dir or below it (both clean and absolute).
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// pathErrorCause drops the path from an *fs.PathError (the message names
// the path as the user wrote it already), and Go's own prefix from
// EvalSymlinks' error about a symlink loop.
func pathErrorCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	if msg, ok := strings.CutPrefix(err.Error(), "EvalSymlinks: "); ok {
		return errors.New(msg)
	}
	return err
}

// promptBlocks builds the prompt: the text block, then one block per
// attachment, chosen by what the agent advertised in its initialize answer
// (agentCapabilities.promptCapabilities). An image (png, jpeg, gif, webp)
// is an image block where the agent takes images; a text file (UTF-8, at
// most 1 MiB) is an embedded text resource where it takes embedded
// context; anything else, or past 10 MiB embedded in all, is a
// resource_link, which every agent takes.
func promptBlocks(text string, files []attachment, caps acp.PromptCapabilities) ([]acp.ContentBlock, error) {
	blocks := make([]acp.ContentBlock, 0, 1+len(files))
	blocks = append(blocks, acp.TextBlock(text))
	budget := int64(maxEmbedded)
	for _, f := range files {
		b, used, err := f.block(caps, budget)
		if err != nil {
			return nil, err
		}
		budget -= used
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// block is the content block of one file and the bytes it embeds, with
// budget bytes left to embed.
func (f attachment) block(caps acp.PromptCapabilities, budget int64) (acp.ContentBlock, int64, error) {
	uri := fileURI(f.abs)
	switch {
	case f.image && caps.Image && f.size <= budget:
		data, err := f.read(budget)
		if err != nil || data == nil {
			return f.link(uri), 0, err
		}
		b := acp.ImageBlock(base64.StdEncoding.EncodeToString(data), f.mimeType)
		b.Image.Uri = &uri
		return b, int64(len(data)), nil
	case !f.image && !f.binary && caps.EmbeddedContext && f.size <= min(maxEmbeddedText, budget):
		data, err := f.read(min(maxEmbeddedText, budget))
		if err != nil || data == nil || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			return f.link(uri), 0, err
		}
		res := &acp.TextResourceContents{Uri: uri, Text: string(data)}
		if f.mimeType != "" {
			res.MimeType = &f.mimeType
		}
		return acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: res}), int64(len(data)), nil
	}
	return f.link(uri), 0, nil
}

// read reads the file opened when it was found, from its start, to embed
// it; nil without an error when it has grown past limit since (it is
// linked instead).
func (f attachment) read(limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.NewSectionReader(f.file, 0, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("with.attach: %s cannot be read: %v", f.path, pathErrorCause(err))
	case int64(len(data)) > limit:
		return nil, nil
	}
	return data, nil
}

// link is the resource_link of the file: its URI, base name, size and,
// when known, MIME type.
func (f attachment) link(uri string) acp.ContentBlock {
	b := acp.ResourceLinkBlock(filepath.Base(f.abs), uri)
	size := int(f.size)
	b.ResourceLink.Size = &size
	if f.mimeType != "" {
		mt := f.mimeType
		b.ResourceLink.MimeType = &mt
	}
	return b
}

// fileURI is the file: URI of an absolute path, escaped.
func fileURI(abs string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
}

// imageType is the MIME type of an image the agent may be sent as one,
// known by its first bytes (an extension can lie), or "".
func imageType(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(head, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return "image/gif"
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// mimeTypes names the types of common files by extension. It is the
// project's own table, not the system's (mime.TypeByExtension reads
// /etc/mime.types), so that the same file is described the same way on
// every machine.
var mimeTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown",
	".txt": "text/plain", ".log": "text/plain",
	".csv": "text/csv", ".tsv": "text/tab-separated-values",
	".html": "text/html", ".htm": "text/html", ".css": "text/css",
	".js": "text/javascript", ".mjs": "text/javascript",
	".json": "application/json", ".yaml": "application/yaml", ".yml": "application/yaml",
	".toml": "application/toml", ".xml": "application/xml", ".pdf": "application/pdf",
	".svg": "image/svg+xml",
	".go":  "text/x-go", ".py": "text/x-python", ".rs": "text/x-rust",
	".c": "text/x-c", ".h": "text/x-c", ".cc": "text/x-c++", ".cpp": "text/x-c++", ".hpp": "text/x-c++",
	".java": "text/x-java", ".sh": "text/x-shellscript",
	".diff": "text/x-diff", ".patch": "text/x-diff",
}
