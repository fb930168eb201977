package termtext

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain ASCII is kept", "hello, world", "hello, world"},
		{"newlines and tabs are kept", "a\tb\nc\n", "a\tb\nc\n"},
		{"accents, CJK and emoji are kept", "café 日本 🎉👩‍💻", "café 日本 🎉👩‍💻"},
		{"an OSC 52 clipboard write ended by BEL is removed", "a\x1b]52;c;cm0gLXJmIH4=\x07b", "ab"},
		{"an OSC 52 clipboard write ended by ST is removed", "a\x1b]52;c;cm0gLXJmIH4=\x1b\\b", "ab"},
		{"a window title is removed", "\x1b]0;pwned\x07done", "done"},
		{"an OSC 8 hyperlink keeps its text", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"clear screen and home are removed", "\x1b[2J\x1b[Hclean", "clean"},
		{"cursor moves are removed", "a\x1b[1A\x1b[2K\x1b[10;20Hb", "ab"},
		{"colours are removed", "\x1b[1;31merror\x1b[0m: x", "error: x"},
		{"private CSI modes are removed", "\x1b[?1049h\x1b[?25lx", "x"},
		{"an 8-bit CSI is removed", "a\u009b2Jb", "ab"},
		{"an 8-bit OSC ended by 8-bit ST is removed", "a\u009d0;title\u009cb", "ab"},
		{"DCS, SOS, PM and APC strings are removed", "a\x1bPq#0\x1b\\b\x1bXsos\x1b\\c\x1b^pm\x1b\\d\x1b_apc\x1b\\e", "abcde"},
		{"two-byte ESC sequences are removed", "a\x1b7b\x1bcc\x1bMd\x1b(Be\x1b#8f", "abcdef"},
		{"a bell is shown, not rung", "ding\x07", "ding␇"},
		{"backspace is shown", "abc\b\bxy", "abc␈␈xy"},
		{"other C0 controls are shown", "\x00\x01\x0b\x0c\x1f", "␀␁␋␌␟"},
		{"DEL is shown", "a\x7fb", "a␡b"},
		{"other C1 controls become U+FFFD", "a\u0085b\u0084c", "a\uFFFDb\uFFFDc"},
		{"a carriage return cannot overwrite a line", "safe command\rrm -rf ~   ", "safe command\nrm -rf ~   "},
		{"CR LF becomes LF", "a\r\nb\r\n", "a\nb\n"},
		{"CR CR LF keeps both breaks", "a\r\r\nb", "a\n\nb"},
		{"a lone ESC at the end is shown", "a\x1b", "a␛"},
		{"ESC before a newline is shown", "a\x1b\nb", "a␛\nb"},
		{"an unterminated CSI at the end is removed", "a\x1b[12;", "a"},
		{"an unterminated OSC swallows the rest", "a\x1b]0;title never ends", "a"},
		{"a CSI cut by a control keeps the control", "a\x1b[1\nb", "a\nb"},
		{"an ESC inside an OSC aborts it and starts its own sequence", "a\x1b]0;t\x1b[2Jb", "ab"},
		{"CAN cancels an OSC", "a\x1b]52;c;xx\x18b", "ab"},
		{"nested introducers are each cut short by the next", "\x1b[\x1b]\x1b[31m\x07x", "␇x"},
		{"ESC ESC [ is removed whole", "\x1b\x1b[2Jx", "␛x"},
		{"invalid UTF-8 becomes U+FFFD", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"a raw 0x9b byte is not a CSI", "a\x9b2Jb", "a\uFFFD2Jb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Sanitize(tt.in); got != tt.want {
				t.Errorf("Sanitize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStripANSI(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"text without escapes is kept", "plain error: x", "plain error: x"},
		{"colours are removed", "\x1b[31mError:\x1b[0m \x1b[1mfile not found\x1b[22m", "Error: file not found"},
		{"256 and true colours are removed", "\x1b[38;5;196mred\x1b[38;2;1;2;3mrgb\x1b[m", "redrgb"},
		{"OSC titles are removed", "\x1b]0;t\x07oops", "oops"},
		{"an 8-bit CSI is removed", "\u009b31mred", "red"},
		{"a lone ESC is removed", "a\x1b", "a"},
		{"newlines, tabs and other controls are kept", "a\n\tb\x07\r", "a\n\tb\x07\r"},
		{"unicode and invalid bytes are kept", "é🎉\xff", "é🎉\xff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StripANSI(tt.in); got != tt.want {
				t.Errorf("StripANSI(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// unsafeRune reports a rune a terminal could act on.
func unsafeRune(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		"", "plain", "\x1b]52;c;eA==\x07", "\x1b[2J", "\u009b31m", "\u009d0;t\u009c",
		"a\rb", "\x1bP\x1b\\", "\x1b", "\x1b[", "\xff\xfe", "🎉\x1b(B", "\x1b]\x1b]\x1b[",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Sanitize(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Sanitize(%q) = %q: not valid UTF-8", in, out)
		}
		for _, r := range out {
			if unsafeRune(r) {
				t.Fatalf("Sanitize(%q) = %q: contains %U", in, out, r)
			}
		}
		if Sanitize(out) != out {
			t.Fatalf("Sanitize is not idempotent on %q", in)
		}
		stripped := StripANSI(in)
		if strings.ContainsRune(stripped, 0x1b) {
			t.Fatalf("StripANSI(%q) = %q: contains ESC", in, stripped)
		}
		if len(stripped) > len(in) {
			t.Fatalf("StripANSI(%q) grew the text", in)
		}
	})
}

// Line and Quote keep what an agent says on the one line acpflow gives
// it. Classes of input covered: each way of breaking a line (LF, CR, CR
// LF, VT, FF, NEL, U+2028, U+2029), escape sequences (CSI cursor moves,
// OSC, 8-bit CSI), bidi overrides and isolates, invisible characters
// (zero-width, non-ASCII spaces, BOM), invalid UTF-8, backslashes and
// quotes (so an escape cannot be faked), and very long text (cut at a
// whole character or escape, saying so).
func TestLineAndQuote(t *testing.T) {
	tests := []struct {
		name, in, line, quote string
		max                   int
	}{
		{"plain text is kept", "Allow once", "Allow once", `"Allow once"`, 0},
		{"accents, CJK and emoji are kept", "café 日本 🎉", "café 日本 🎉", `"café 日本 🎉"`, 0},
		{"LF is escaped", "a\n  1) Allow once", `a\n  1) Allow once`, `"a\n  1) Allow once"`, 0},
		{"CR is escaped", "a\r  1) Allow", `a\r  1) Allow`, `"a\r  1) Allow"`, 0},
		{"CR LF is escaped", "a\r\n  1) Allow", `a\r\n  1) Allow`, `"a\r\n  1) Allow"`, 0},
		{"VT and FF are escaped", "a\vb\fc", `a\vb\fc`, `"a\vb\fc"`, 0},
		{"NEL is escaped", "a\u0085b", `a\u0085b`, `"a\u0085b"`, 0},
		{"line and paragraph separators are escaped", "a\u2028b\u2029c", `a\u2028b\u2029c`, `"a\u2028b\u2029c"`, 0},
		{"a tab is escaped", "a\tb", `a\tb`, `"a\tb"`, 0},
		{"a CSI cursor move is escaped", "ok\x1b[1A\x1b[2K1) Allow", `ok\x1b[1A\x1b[2K1) Allow`, `"ok\x1b[1A\x1b[2K1) Allow"`, 0},
		{"an OSC is escaped", "\x1b]0;t\x07x", `\x1b]0;t\ax`, `"\x1b]0;t\ax"`, 0},
		{"an 8-bit CSI is escaped", "a\u009b2Jb", `a\u009b2Jb`, `"a\u009b2Jb"`, 0},
		{"bidi overrides and isolates are escaped", "rm \u202e-rf\u202c \u2066x\u2069", `rm \u202e-rf\u202c \u2066x\u2069`, `"rm \u202e-rf\u202c \u2066x\u2069"`, 0},
		{"invisible characters are escaped", "a\u200bb\u00a0c\ufeffd\u3000e", `a\u200bb\u00a0c\ufeffd\u3000e`, `"a\u200bb\u00a0c\ufeffd\u3000e"`, 0},
		{"invalid UTF-8 is escaped", "a\xffb\xc3", `a\xffb\xc3`, `"a\xffb\xc3"`, 0},
		{"a backslash cannot fake an escape", `a\nb`, `a\\nb`, `"a\\nb"`, 0},
		{"a quote cannot end Quote's quotes", `a" (allow_once)`, `a" (allow_once)`, `"a\" (allow_once)"`, 0},
		{"long text is cut and says so", "abcdefghij", "abcd… (cut from 10 bytes)", `"abcd"… (cut from 10 bytes)`, 4},
		{"a cut never splits a character", "ab日本", "ab… (cut from 8 bytes)", `"ab"… (cut from 8 bytes)`, 4},
		{"a cut never splits an escape", "ab\ncd", "ab… (cut from 5 bytes)", `"ab"… (cut from 5 bytes)`, 3},
		{"text of exactly max bytes is not cut", "abcd", "abcd", `"abcd"`, 4},
		{"empty text", "", "", `""`, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Line(tt.in, tt.max); got != tt.line {
				t.Errorf("Line(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.line)
			}
			if got := Quote(tt.in, tt.max); got != tt.quote {
				t.Errorf("Quote(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.quote)
			}
		})
	}
}

func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "plain", "a\r\n  1) Allow once", "\u2028\u2029\u0085\v\f", "\x1b[1A", "\u202e", "\xff", `\"`} {
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, in string, max int) {
		max = max % 4096
		for _, out := range []string{Line(in, max), Quote(in, max)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: not valid UTF-8", out)
			}
			for _, r := range out {
				if !strconv.IsPrint(r) {
					t.Fatalf("Line/Quote(%q) = %q: holds %U", in, out, r)
				}
			}
			if max > 0 && len(out) > max+len(`""… (cut from  bytes)`)+20 {
				t.Fatalf("Line/Quote(%q, %d) = %d bytes", in, max, len(out))
			}
		}
	})
}
