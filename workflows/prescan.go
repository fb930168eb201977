package workflows

import "unicode/utf8"

// maxDepth bounds how deeply a file nests lists and mappings, flow ([ {)
// and block (indentation) together. The examples nest 6 deep; an
// output-schema written inline a few more. goccy's parser needs memory
// that grows with the square of the depth (40 000 nested [ took 2.5 GB),
// so the file is refused before the parser sees it.
const maxDepth = 100

// prescan bounds a file before goccy's parser builds its AST: nesting
// deeper than maxDepth, or more than maxNodes values (the parser takes
// ~900 bytes per value: 2 million took 1.7 GB). It reads the bytes once,
// allocating nothing but its stacks, and returns the position of the
// first value past a bound with the message, or ok.
//
// # Notes
//
// It is a tokenizer for the shape of YAML only, not a parser: quoted
// scalars, block scalars (| and >) and comments are skipped so that
// brackets inside text do not count, and what it cannot tell apart it
// counts generously (a multi-line plain scalar's continuation lines count
// as one more level). The real parser still reports every syntax error.
func prescan(src []byte) (at pos, msg string, ok bool) {
	s := scanner{}
	lines := splitLines(string(src))
	for n, line := range lines {
		if p, m, bad := s.line(n+1, line); bad {
			return p, m, false
		}
	}
	return pos{}, "", true
}

type scanner struct {
	flow  int   // open [ and {
	block []int // indentation columns of the open block levels
	nodes int

	quote       byte // the open quote of a scalar that spans lines, or 0
	inBlock     bool // in a block scalar (| or >)
	blockIndent int  // the indentation of the block scalar's parent line
}

// The messages of the two bounds, at the value that passes them.
const (
	tooDeep = "lists and mappings nest deeper than 100 levels here; a workflow needs a handful"
	tooMany = "the file has more than 100000 YAML values (found at this one); a workflow has a few thousand"
)

func (s *scanner) line(ln int, line string) (pos, string, bool) {
	j, indent, more := s.lineStart(line)
	if !more {
		return pos{}, "", false
	}
	fail := func(msg string) (pos, string, bool) {
		return pos{ln, utf8.RuneCountInString(line[:j]) + 1}, msg, true
	}
	if s.flow+len(s.block) > maxDepth {
		return fail(tooDeep)
	}
	start := true // a new value may begin at j
	for j < len(line) {
		c := line[j]
		if c == ' ' || c == '\t' {
			j++
			continue
		}
		if c == '#' && (j == 0 || line[j-1] == ' ' || line[j-1] == '\t') {
			return pos{}, "", false
		}
		var passed bool
		if j, start, passed = s.between(line, j, start); passed {
			continue
		}
		// A value begins at j.
		switch c {
		case '[', '{':
			s.flow++
			s.nodes++
			if s.flow+len(s.block) > maxDepth {
				return fail(tooDeep)
			}
			j++
		case '"', '\'':
			s.nodes++
			s.quote = c
			j = s.skipQuote(line, j+1)
			if j < 0 {
				return pos{}, "", false
			}
			start = false
		case '|', '>':
			if s.flow == 0 {
				s.nodes++
				s.inBlock, s.blockIndent = true, indent
				return pos{}, "", false
			}
			j++
			start = false
		case '-', '?':
			if s.flow == 0 && (j+1 == len(line) || line[j+1] == ' ' || line[j+1] == '\t') {
				var deep bool
				if j, deep = s.blockEntry(line, j); deep {
					return fail(tooDeep)
				}
				continue
			}
			s.nodes++
			start = false
			j++
		case '&', '!':
			// An anchor or a tag: the value follows it.
			for j < len(line) && line[j] != ' ' && line[j] != '\t' {
				j++
			}
		default:
			s.nodes++
			start = false
			j++
		}
		if s.nodes > maxNodes {
			return fail(tooMany)
		}
	}
	return pos{}, "", false
}

// between passes what at line[j] does not begin a value: in flow, a
// closing bracket or the , or : between entries; after a value's start,
// the rest of its text up to a key's ": ". It returns where the scan goes
// on, whether a value may begin there, and false when one begins at j.
func (s *scanner) between(line string, j int, start bool) (int, bool, bool) {
	c := line[j]
	if s.flow > 0 {
		switch c {
		case '[', '{':
			return j, true, false // opened by the caller, as any value that begins
		case ']', '}':
			s.flow--
			return j + 1, false, true
		case ',', ':':
			return j + 1, true, true
		}
	}
	if !start {
		if s.flow == 0 && c == ':' && (j+1 == len(line) || line[j+1] == ' ' || line[j+1] == '\t') {
			start = true // a key ends; its value may follow
		}
		return j + 1, start, true
	}
	return j, true, false
}

// lineStart reads where a line begins: the rest of a block scalar or of a
// quoted scalar that runs on, or, outside flow, the indentation that closes
// and opens block levels. It returns where the scan goes on, the line's
// indentation, and false when nothing on the line is left to count.
func (s *scanner) lineStart(line string) (j, indent int, more bool) {
	for indent < len(line) && line[indent] == ' ' {
		indent++
	}
	if s.inBlock {
		if indent == len(line) || indent > s.blockIndent {
			return 0, indent, false // text of the block scalar, or a blank line in it
		}
		s.inBlock = false
	}
	if s.quote != 0 {
		j = s.skipQuote(line, 0)
		return j, indent, j >= 0
	}
	if s.flow == 0 {
		if indent == len(line) || line[indent] == '#' {
			return 0, indent, false
		}
		for len(s.block) > 0 && s.block[len(s.block)-1] > indent {
			s.block = s.block[:len(s.block)-1]
		}
		if len(s.block) == 0 || s.block[len(s.block)-1] < indent {
			s.block = append(s.block, indent)
		}
		j = indent
	}
	return j, indent, true
}

// blockEntry passes the "- " (or "? ") of a block entry at line[j]: what
// follows it on the line nests one level deeper. It returns where that
// begins and whether the nesting is now past maxDepth.
func (s *scanner) blockEntry(line string, j int) (int, bool) {
	s.nodes++
	j++
	for j < len(line) && line[j] == ' ' {
		j++
	}
	if j < len(line) && line[j] != '#' {
		if len(s.block) == 0 || s.block[len(s.block)-1] < j {
			s.block = append(s.block, j)
			return j, s.flow+len(s.block) > maxDepth
		}
	}
	return j, false
}

// skipQuote skips a quoted scalar's text from line[j:], which may go on
// past the line, and returns where the closing quote ends, or -1 when the
// scalar continues on the next line.
func (s *scanner) skipQuote(line string, j int) int {
	for j < len(line) {
		switch line[j] {
		case '\\':
			if s.quote == '"' {
				j += 2
				continue
			}
		case '\'':
			if s.quote == '\'' {
				if j+1 < len(line) && line[j+1] == '\'' {
					j += 2
					continue
				}
				s.quote = 0
				return j + 1
			}
		case '"':
			if s.quote == '"' {
				s.quote = 0
				return j + 1
			}
		}
		j++
	}
	return -1
}
