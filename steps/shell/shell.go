package shell

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// scriptArg is where a custom shell takes the script file, as in GitHub
// Actions' `shell: perl {0}`.
const scriptArg = "{0}"

// shells are the shells known by name, and how each runs a command line.
// bash and sh stop at the first failing command (-e), and bash at a failing
// command in a pipeline too (-o pipefail), reading no profile or rc file,
// as GitHub Actions runs them: a test gate that prints a failure and
// carries on would pass.
var shells = map[string][]string{
	"bash":    {"--noprofile", "--norc", "-eo", "pipefail", "-c"},
	"sh":      {"-e", "-c"},
	"dash":    {"-e", "-c"},
	"zsh":     {"-e", "-c"},
	"ksh":     {"-e", "-c"},
	"python":  {"-c"},
	"python3": {"-c"},
}

// knownShells lists the names of shells, for messages.
func knownShells() string {
	var names []string
	for n := range shells {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// parseShell reads a `shell:` value: a known shell's name, or a command
// line with {0} where the script file goes. It returns the words.
func parseShell(text string) ([]string, error) {
	words := strings.Fields(text)
	switch {
	case len(words) == 0:
		return nil, errors.New("shell is empty; omit it for the default (bash, else sh)")
	case len(words) == 1 && shells[words[0]] != nil:
		return words, nil
	}
	n := 0
	for _, w := range words {
		n += strings.Count(w, scriptArg)
	}
	switch {
	case n == 0 && len(words) == 1:
		return nil, fmt.Errorf("unknown shell %q: name one of %s, or write a command line with {0} where the script file goes (e.g. %q)", text, knownShells(), words[0]+" "+scriptArg)
	case n == 0:
		return nil, fmt.Errorf("%q has no {0}: a custom shell is a command line with {0} where the script file goes (e.g. %q)", text, words[0]+" "+scriptArg)
	case n > 1:
		return nil, fmt.Errorf("%q has {0} %d times; write it once, where the script file goes", text, n)
	case strings.Contains(words[0], scriptArg):
		return nil, fmt.Errorf("%q starts with {0}: the program comes first, then {0} where the script file goes", text)
	}
	return words, nil
}

// command is what runs a step's command line: the program, its arguments,
// and the script file to remove afterwards ("" for none).
type command struct {
	path   string
	args   []string
	script string
}

// commandFor is how the command line runs under shell (the with: value,
// "" for the default: bash when it is on PATH, else sh). Programs are
// looked up on acpflow's PATH, as an agent's command is.
func commandFor(shell, line string) (command, error) {
	if shell == "" {
		shell = defaultShell()
	}
	words, err := parseShell(shell)
	if err != nil {
		return command{}, fmt.Errorf("shell: %w", err)
	}
	path, err := exec.LookPath(words[0])
	if err != nil {
		if strings.ContainsRune(words[0], os.PathSeparator) {
			return command{}, fmt.Errorf("shell: %s: %w", words[0], errors.Unwrap(err))
		}
		return command{}, fmt.Errorf("shell: %s not found in PATH", words[0])
	}
	if flags, ok := shells[words[0]]; ok && len(words) == 1 {
		return command{path: path, args: append(slices.Clone(flags), line)}, nil
	}
	f, err := os.CreateTemp("", "acpflow-shell-*")
	if err != nil {
		return command{}, fmt.Errorf("shell: cannot write the script file: %w", err)
	}
	_, werr := f.WriteString(line)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return command{}, fmt.Errorf("shell: cannot write the script file: %w", werr)
	}
	args := make([]string, 0, len(words)-1)
	for _, w := range words[1:] {
		args = append(args, strings.ReplaceAll(w, scriptArg, f.Name()))
	}
	return command{path: path, args: args, script: f.Name()}, nil
}

// defaultShell is the shell of a step without shell:: bash when it is on
// PATH, else sh.
func defaultShell() string {
	if _, err := exec.LookPath("bash"); err == nil {
		return "bash"
	}
	return "sh"
}
