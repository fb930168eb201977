// Package termtext makes text that came from an agent safe to write to a
// terminal. acpflow's human views (run, show, runs, probe) print agent output,
// errors and stderr tails; an agent must not be able to set the user's
// clipboard (OSC 52), retitle the window, clear the screen or overwrite a line
// through them. Stored results, --json and --output keep the exact text: only
// what is written for a person to read goes through here.
//
// # Notes
//
// Escape sequences are recognised as a terminal recognises them (ECMA-48, in
// their 7-bit form ESC … and their 8-bit form U+009B …, U+009D … as decoded
// from UTF-8): CSI (ESC [ params intermediates final), the string sequences
// OSC, DCS, SOS, PM and APC (ESC ] … ended by BEL, ESC \ or U+009C; a CAN or
// SUB cancels them, another ESC aborts them), and the short ESC sequences
// (ESC 7, ESC c, ESC ( B, …). A sequence left unterminated at the end of the
// text swallows the rest of it, as it would on a terminal.
package termtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	bel = 0x07
	esc = 0x1b
	can = 0x18
	sub = 0x1a
	del = 0x7f

	c1CSI = '\u009b'
	c1ST  = '\u009c'
	c1OSC = '\u009d'
	c1DCS = '\u0090'
	c1SOS = '\u0098'
	c1PM  = '\u009e'
	c1APC = '\u009f'
)

// Sanitize returns s made safe to write to a terminal:
//
//   - whole escape sequences (CSI, OSC, DCS, SOS, PM, APC, short ESC
//     sequences; 7-bit and 8-bit) are removed;
//   - a carriage return becomes a newline (so it cannot send the cursor back
//     over a line), and CR LF becomes LF;
//   - every other C0 control but newline and tab, and DEL, is shown as its
//     Unicode control picture (BEL as ␇, a lone ESC as ␛, backspace as ␈,
//     DEL as ␡), so it is visible but inert;
//   - the other C1 controls (U+0080–U+009F) and invalid UTF-8 become U+FFFD.
//
// Printable text, newlines, tabs and any valid non-control Unicode (accents,
// CJK, emoji) are kept as they are. Text that needs no change is returned
// without copying.
func Sanitize(s string) string {
	if isSafe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == esc || isC1Introducer(r):
			if end, ok := sequenceEnd(s, i); ok {
				i = end
				continue
			}
			b.WriteRune(controlPicture(r))
		case r == '\n' || r == '\t':
			b.WriteByte(byte(r))
		case r == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				break // the LF that follows is written on its own
			}
			b.WriteByte('\n')
		case r < 0x20 || r == del:
			b.WriteRune(controlPicture(r))
		case r >= 0x80 && r <= 0x9f:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// StripANSI returns s without its escape sequences (colour codes, cursor
// moves, OSC strings; the same sequences Sanitize removes) and without a
// lone ESC; every other byte is kept as it is. It is for error text that an
// agent or a tool coloured for its own terminal, before the text is stored.
func StripANSI(s string) string {
	if !strings.ContainsRune(s, esc) && !hasC1Introducer(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == esc || isC1Introducer(r) {
			if end, ok := sequenceEnd(s, i); ok {
				i = end
				continue
			}
			i += size // a lone ESC
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// isSafe reports whether s can be written as it is: valid UTF-8 with no
// control character but newline and tab.
func isSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return safeUnicode(s[i:])
		}
		if (c < 0x20 && c != '\n' && c != '\t') || c == del {
			return false
		}
	}
	return true
}

func safeUnicode(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= del && r <= 0x9f) {
			return false
		}
		i += size
	}
	return true
}

func hasC1Introducer(s string) bool {
	for _, r := range s {
		if isC1Introducer(r) {
			return true
		}
	}
	return false
}

// isC1Introducer reports whether r begins an 8-bit escape sequence.
func isC1Introducer(r rune) bool {
	switch r {
	case c1CSI, c1OSC, c1DCS, c1SOS, c1PM, c1APC:
		return true
	}
	return false
}

// controlPicture is the visible stand-in for a C0 control or DEL (U+2400–U+2421).
func controlPicture(r rune) rune {
	switch {
	case r < 0x20:
		return 0x2400 + r
	case r == del:
		return '\u2421'
	}
	return utf8.RuneError
}

// sequenceEnd reports where the escape sequence that begins at s[i] (an ESC
// or a C1 introducer) ends. It reports false for an ESC that begins no
// sequence: one at the end of s, or followed by a control or non-ASCII.
func sequenceEnd(s string, i int) (int, bool) {
	r, size := utf8.DecodeRuneInString(s[i:])
	j := i + size
	switch r {
	case c1CSI:
		return csiEnd(s, j), true
	case c1OSC, c1DCS, c1SOS, c1PM, c1APC:
		return stringEnd(s, j), true
	}
	if j >= len(s) {
		return j, false
	}
	switch c := s[j]; {
	case c == '[':
		return csiEnd(s, j+1), true
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		return stringEnd(s, j+1), true
	case c >= 0x20 && c <= 0x2f: // intermediates, then a final byte: ESC ( B
		k := j
		for k < len(s) && s[k] >= 0x20 && s[k] <= 0x2f {
			k++
		}
		if k < len(s) && s[k] >= 0x30 && s[k] <= 0x7e {
			k++
		}
		return k, true
	case c >= 0x30 && c <= 0x7e: // ESC 7, ESC c, ESC M, …
		return j + 1, true
	}
	return j, false
}

// csiEnd returns the index after a control sequence whose parameters start
// at s[j]: parameter bytes 0x30–0x3F, intermediates 0x20–0x2F, a final byte
// 0x40–0x7E. Any other byte cuts the sequence short there; it is then read
// as text (a terminal would also abort or execute it).
func csiEnd(s string, j int) int {
	for j < len(s) {
		c := s[j]
		switch {
		case c >= 0x20 && c <= 0x3f:
			j++
		case c >= 0x40 && c <= 0x7e:
			return j + 1
		default:
			return j
		}
	}
	return j
}

// stringEnd returns the index after a control string (OSC, DCS, SOS, PM,
// APC) whose body starts at s[j]. BEL, ESC \ and ST end it; CAN and SUB
// cancel it; any other ESC aborts it and begins a sequence of its own.
func stringEnd(s string, j int) int {
	for j < len(s) {
		switch c := s[j]; c {
		case bel, can, sub:
			return j + 1
		case esc:
			if j+1 < len(s) && s[j+1] == '\\' {
				return j + 2
			}
			return j
		case 0xc2: // U+009C (ST) in UTF-8 is C2 9C
			if j+1 < len(s) && s[j+1] == 0x9c {
				return j + 2
			}
		}
		j++
	}
	return j
}

// Line returns s written for a person to read on one line of a terminal,
// as a value acpflow shows beside its own words (an id, a name, a title):
// every character that is not printable is written as a Go escape (a line
// break as \n, ESC as \x1b, NEL as \u0085, the line and paragraph
// separators as \u2028 and \u2029, a bidi override as \u202e), invalid
// UTF-8 as \xff, and a backslash as \\. What is left is printable text
// that cannot break the line, move the cursor or reorder what follows it.
// A result longer than max bytes is cut at a whole character or escape and
// ends with "… (cut from N bytes)", N the length of s; max <= 0 is no
// bound. Plain text (letters, digits, punctuation, accents, CJK, emoji
// without joiners) is returned as it is.
//
// # Notes
//
// "Printable" is strconv.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space. So format characters (U+200B–U+200F,
// U+202A–U+202E, U+2066–U+2069, U+FEFF) and spaces other than ASCII's
// (U+00A0, U+2000–U+200A, U+3000) are escaped too: on one line, an
// invisible character is a way to make two values look alike.
func Line(s string, max int) string {
	return escape(s, max, 0)
}

// Quote is Line in double quotes, a quote inside written as \": for a
// value whose start and end a person must see (a tool's title or command,
// an option's name). When cut, the mark follows the closing quote.
func Quote(s string, max int) string {
	return escape(s, max, '"')
}

// escape is Line and Quote: quote is 0 or the quote character.
func escape(s string, max int, quote byte) string {
	var b strings.Builder
	if quote != 0 {
		b.WriteByte(quote)
	}
	open := b.Len()
	cut := false
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = `\x` + hex2(s[i])
		case r == '\\':
			piece = `\\`
		case quote != 0 && r == rune(quote):
			piece = `\` + string(rune(quote))
		case strconv.IsPrint(r):
			piece = s[i : i+size]
		default:
			q := strconv.QuoteRuneToASCII(r) // '\n', '\x1b', '\u2028'
			piece = q[1 : len(q)-1]
		}
		if max > 0 && b.Len()-open+len(piece) > max {
			cut = true
			break
		}
		b.WriteString(piece)
		i += size
	}
	if quote != 0 {
		b.WriteByte(quote)
	}
	if cut {
		b.WriteString("… (cut from " + strconv.Itoa(len(s)) + " bytes)")
	}
	return b.String()
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}

// Cut is s cut to at most n bytes, not inside a character: for text kept
// in a record or an error, where a cut character would be invalid UTF-8.
func Cut(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
