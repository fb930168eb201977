package acpagent

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/steps"
)

// MCP server transports (ACP session/new mcpServers). Every agent must take
// stdio; http and sse only one that advertises them.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
	MCPSSE   = "sse"
)

// MCPServerKeys are the keys an entry of mcp-servers accepts.
var MCPServerKeys = []string{"name", "type", "command", "args", "env", "url", "headers"}

// mcpNamePattern is what a server's name looks like: agents build tool
// names from it (claude's mcp__NAME__tool), so it is a plain word.
var mcpNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// MCPServersOf reads `mcp-servers:` from the plain values of the file (a
// list of mappings, as YAML or a step's with: gives them; the step's
// rendered or not) and checks it (see CheckMCPServers). Its errors are
// *FieldError whose path is at followed by the entry's index ("0", "1", …)
// and key, and whose message starts with at joined by dots.
//
// A number or boolean where a string is wanted is taken as written, as an
// agent's env: takes it.
func MCPServersOf(v any, at []string) ([]steps.MCPServer, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, steps.FieldErrorf(at, "%s: want a list of servers such as [{name: github, command: github-mcp-server}], got %s", strings.Join(at, "."), kindOf(v))
	}
	servers := make([]steps.MCPServer, 0, len(list))
	for i, item := range list {
		s, err := mcpServerOf(item, at, i)
		if err != nil {
			return nil, err
		}
		servers = append(servers, s)
	}
	if err := CheckMCPServers(servers, at); err != nil {
		return nil, err
	}
	return servers, nil
}

// mcpServerOf reads entry i of a list of servers; CheckMCPServers checks
// what it read.
func mcpServerOf(item any, at []string, i int) (steps.MCPServer, error) {
	e := mcpEntry{at: at, i: i}
	m, ok := item.(map[string]any)
	if !ok {
		return steps.MCPServer{}, e.errorf(nil, "want a mapping such as {name: github, command: github-mcp-server}, got %s", kindOf(item))
	}
	if name, ok := m["name"].(string); ok {
		e.name = name
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(MCPServerKeys, k) {
			hint := ""
			if s := suggest.Closest(k, MCPServerKeys); s != "" {
				hint = fmt.Sprintf("; did you mean %q?", s)
			}
			return steps.MCPServer{}, e.errorf([]string{k}, "unknown key %q%s (known: %s)", k, hint, strings.Join(MCPServerKeys, ", "))
		}
	}
	var s steps.MCPServer
	var err error
	for _, f := range []struct {
		key string
		to  *string
	}{{"name", &s.Name}, {"type", &s.Type}, {"command", &s.Command}, {"url", &s.URL}} {
		v, set := m[f.key]
		if !set {
			continue
		}
		if *f.to, err = e.text(v, f.key); err != nil {
			return steps.MCPServer{}, err
		}
		if *f.to == "" {
			return steps.MCPServer{}, e.errorf([]string{f.key}, "%s is empty", f.key)
		}
	}
	for _, k := range []string{"name", "type"} {
		if v, _ := m[k].(string); strings.Contains(v, "${{") {
			return steps.MCPServer{}, e.errorf([]string{k}, "%s: ${{ }} is not rendered here; write the %s itself", k, k)
		}
	}
	if v, set := m["args"]; set {
		args, ok := v.([]any)
		if !ok {
			return steps.MCPServer{}, e.errorf([]string{"args"}, "args: want a list of strings, got %s", kindOf(v))
		}
		s.Args = make([]string, 0, len(args))
		for j, a := range args {
			arg, err := e.text(a, "args", strconv.Itoa(j))
			if err != nil {
				return steps.MCPServer{}, err
			}
			s.Args = append(s.Args, arg)
		}
	}
	if s.Env, err = e.vars(m, "env", "variable"); err != nil {
		return steps.MCPServer{}, err
	}
	if s.Headers, err = e.vars(m, "headers", "header"); err != nil {
		return steps.MCPServer{}, err
	}
	if s.Type == "" {
		s.Type = MCPStdio
	}
	// What belongs to the other transports is refused here, where the file
	// still says which keys it wrote.
	for _, k := range []string{"command", "args", "env", "url", "headers"} {
		if _, set := m[k]; set && !mcpKeyFits(s.Type, k) {
			return steps.MCPServer{}, e.errorf([]string{k}, "%s is not a key of %s", k, mcpTransportKeys(s.Type))
		}
	}
	return s, nil
}

// CheckMCPServers checks servers as the runner needs them: each named (a
// plain word, once in the list), of a known type, with the command (stdio)
// or url (http, sse) it needs. Errors are as MCPServersOf's.
func CheckMCPServers(servers []steps.MCPServer, at []string) error {
	seen := map[string]int{}
	for i, s := range servers {
		e := mcpEntry{at: at, i: i, name: s.Name}
		switch {
		case s.Name == "":
			return e.errorf(nil, "missing name: give the server a name such as github")
		case !mcpNamePattern.MatchString(s.Name):
			return e.errorf([]string{"name"}, "name %q: use letters, digits, _ and -, starting with a letter or _", s.Name)
		}
		if first, dup := seen[s.Name]; dup {
			return e.errorf([]string{"name"}, "duplicate name %q: %s[%d] has it already", s.Name, strings.Join(at, "."), first)
		}
		seen[s.Name] = i
		switch s.Type {
		case MCPStdio:
			if s.Command == "" {
				return e.errorf(nil, "missing command: a stdio server needs the command that starts it (or give type: http or sse and a url)")
			}
		case MCPHTTP, MCPSSE:
			if s.URL == "" {
				return e.errorf(nil, "missing url: an %s server needs the url to reach it", s.Type)
			}
			if !strings.Contains(s.URL, "${{") {
				if err := CheckMCPURL(s.URL); err != nil {
					return e.errorf([]string{"url"}, "url: %s", err)
				}
			}
		default:
			return e.errorf([]string{"type"}, "unknown type %q (known: %s, %s, %s)", s.Type, MCPStdio, MCPHTTP, MCPSSE)
		}
	}
	return nil
}

// CheckMCPURL checks the url of an http or sse server: an absolute http or
// https URL with a host. Its error never quotes the URL, which may carry a
// token in its query.
func CheckMCPURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("want an http:// or https:// URL")
	case u.Host == "":
		return errors.New("the URL has no host")
	}
	return nil
}

// mcpEntry words the errors about one entry of a list of servers.
type mcpEntry struct {
	at   []string
	i    int
	name string
}

// errorf is an error at key (a path below the entry; nil: the entry).
func (e mcpEntry) errorf(key []string, format string, args ...any) error {
	path := append(append(slices.Clone(e.at), strconv.Itoa(e.i)), key...)
	where := fmt.Sprintf("%s[%d]", strings.Join(e.at, "."), e.i)
	if e.name != "" {
		where += fmt.Sprintf(" (%s)", e.name)
	}
	return &steps.FieldError{Path: path, Err: fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))}
}

// text reads a string value: numbers and booleans as written. The message
// names the value's kind, never the value.
func (e mcpEntry) text(v any, key ...string) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", e.errorf(key, "%s: want a string, got %s", strings.Join(key, "."), kindOf(v))
}

// vars reads env or headers: a mapping of names to values, in name order
// (a mapping has no other order once it is a Go map).
func (e mcpEntry) vars(m map[string]any, key, what string) ([]steps.MCPVar, error) {
	v, set := m[key]
	if !set {
		return nil, nil
	}
	vars, ok := v.(map[string]any)
	if !ok {
		return nil, e.errorf([]string{key}, "%s: want a mapping of %s names to values, got %s", key, what, kindOf(v))
	}
	out := make([]steps.MCPVar, 0, len(vars))
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		if !validVarName(key, name) {
			return nil, e.errorf([]string{key}, "%s: %q is not a %s name", key, name, what)
		}
		value, err := e.text(vars[name], key, name)
		if err != nil {
			return nil, err
		}
		out = append(out, steps.MCPVar{Name: name, Value: value})
	}
	return out, nil
}

// validVarName: an environment variable's name has no = or NUL; a header's
// is an HTTP token (RFC 9110).
func validVarName(key, name string) bool {
	if name == "" {
		return false
	}
	if key == "env" {
		return !strings.ContainsAny(name, "=\x00")
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// mcpKeyFits says whether a key belongs to a transport; an unknown
// transport takes any (its type is the error).
func mcpKeyFits(typ, key string) bool {
	switch typ {
	case MCPStdio:
		return key == "command" || key == "args" || key == "env"
	case MCPHTTP, MCPSSE:
		return key == "url" || key == "headers"
	}
	return true
}

func mcpTransportKeys(typ string) string {
	if typ == MCPStdio {
		return "a stdio server (it takes command, args and env; give type: http or sse for a url)"
	}
	return "an " + typ + " server (it takes url and headers)"
}

// kindOf names the kind of a plain value, for messages that must not show
// the value itself.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("a %T", v)
}
