package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DefaultDeny is what no sandboxed agent may read or write, relative to the
// user's home directory: credentials that would let whatever runs in the
// agent act as the user elsewhere. Each entry says why.
var DefaultDeny = []string{
	".ssh",                            // private keys: a login to every host that trusts them
	".gnupg",                          // private signing and encryption keys
	".aws",                            // AWS access keys and SSO session tokens
	".azure",                          // Azure CLI access and refresh tokens
	".config/gcloud",                  // Google Cloud credentials and application-default tokens
	".kube",                           // kubeconfig: cluster certificates and bearer tokens
	".docker/config.json",             // container registry auth (base64 passwords, tokens)
	".netrc",                          // plaintext passwords for hosts curl, git and ftp log in to
	".git-credentials",                // git's store helper: plaintext HTTPS tokens
	".config/gh",                      // the GitHub CLI's OAuth token
	".npmrc",                          // npm registry tokens, which can publish packages
	".pypirc",                         // PyPI upload tokens
	".cargo/credentials*",             // crates.io tokens (credentials, credentials.toml)
	".terraform.d",                    // Terraform Cloud API tokens (credentials.tfrc.json)
	".config/op",                      // the 1Password CLI's account config and sessions
	".codex/auth.json",                // Codex's OpenAI key or ChatGPT tokens
	".claude/.credentials.json",       // Claude Code's OAuth tokens
	".gemini/oauth_creds.json",        // Gemini CLI's Google OAuth tokens
	".local/share/opencode/auth.json", // opencode's provider keys
}

// denyList is the resolved list: absolute, clean paths, of which the last
// element may be a glob pattern. The walk asks it about every path it
// visits, so entries are sorted into exact paths and patterns once.
type denyList struct {
	exact    []string
	patterns []string // entries whose last element is a pattern
}

// add puts the absolute, clean path p on the list.
func (d *denyList) add(p string) {
	if isGlob(filepath.Base(p)) {
		d.patterns = append(d.patterns, p)
	} else {
		d.exact = append(d.exact, p)
	}
}

// all is every entry, exact paths first.
func (d denyList) all() []string {
	return append(append([]string{}, d.exact...), d.patterns...)
}

// denyList resolves DefaultDeny against Home, drops the default entries
// that lie inside one of the agent's own StateDirs, and adds Deny.
func (s Spec) denyList() denyList {
	var d denyList
	for _, home := range s.homes() {
		for _, e := range DefaultDeny {
			p := filepath.Join(home, e)
			own := false
			for _, sd := range s.StateDirs {
				if within(p, filepath.Clean(sd)) {
					own = true
				}
			}
			if !own {
				d.add(p)
			}
		}
	}
	for _, e := range s.Deny {
		d.add(filepath.Clean(e))
	}
	return d
}

// homes are the directories DefaultDeny is resolved against: the agent's
// HOME and, when another, the home of the user acpflow runs as.
func (s Spec) homes() []string {
	if s.UserHome == "" || filepath.Clean(s.UserHome) == filepath.Clean(s.Home) {
		return []string{s.Home}
	}
	return []string{s.Home, filepath.Clean(s.UserHome)}
}

// CheckPaths refuses a writable path (Cwd when set, Write) that is, or
// resolves through symlinks into, a denied one: Landlock follows links,
// so a write: entry or cwd linking to ~/.ssh would open it. Callers check
// a workflow's paths with it before anything runs; the launcher checks
// again at the spawn.
func (s Spec) CheckPaths() error {
	d := s.denyList().resolved()
	for _, w := range append([]string{s.Cwd, s.TmpDir}, s.Write...) {
		if w == "" {
			continue
		}
		p := filepath.Clean(w)
		if e := d.covering(p); e != "" {
			return fmt.Errorf("sandbox: writable path %s is inside the denied %s", w, e)
		}
		if r := resolve(p); r != p {
			if e := d.covering(r); e != "" {
				return fmt.Errorf("sandbox: writable path %s resolves to %s, inside the denied %s", w, r, e)
			}
		}
	}
	return nil
}

// resolve is p with the symlinks of its longest existing prefix
// resolved: a path yet to be made below a link lands where the link
// points.
func resolve(p string) string {
	rest := ""
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			return filepath.Join(r, rest)
		}
		if q == "/" || q == "." {
			return p
		}
		rest = filepath.Join(filepath.Base(q), rest)
	}
}

// Denied is what spec keeps unreadable, as its result records it: DefaultDeny
// resolved against Home, less the entries inside the agent's own StateDirs,
// and Deny.
func (s Spec) Denied() []string { return s.denyList().all() }

// resolved adds, for each entry that is or passes through a symlink, the
// path it resolves to: Landlock grants follow the real directory tree, so
// a denied ~/.ssh that links to /data/ssh must keep /data/ssh unread too.
//
// Most entries share a directory (HOME): each directory is resolved once,
// and an entry is resolved further only when it is itself a symlink. The
// launcher runs this on every sandboxed spawn.
func (d denyList) resolved() denyList {
	out := denyList{exact: append([]string{}, d.exact...), patterns: append([]string{}, d.patterns...)}
	dirs := map[string]string{} // directory → what it resolves to, "" if it does not
	for _, p := range d.all() {
		dir, base := filepath.Dir(p), filepath.Base(p)
		rdir, seen := dirs[dir]
		if !seen {
			if r, err := filepath.EvalSymlinks(dir); err == nil {
				rdir = r
			}
			dirs[dir] = rdir
		}
		if rdir == "" {
			continue // the directory does not exist: nothing below it to reach
		}
		real := filepath.Join(rdir, base)
		if real != p {
			out.add(real)
		}
		if isGlob(base) {
			continue
		}
		if fi, err := os.Lstat(real); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if r, err := filepath.EvalSymlinks(real); err == nil && r != p && r != real {
			out.add(r)
		}
	}
	return out
}

// existing are the paths on the list that name something now, glob
// patterns expanded, each once.
func (d denyList) existing() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] && exists(p) {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range d.exact {
		add(p)
	}
	for _, pat := range d.patterns {
		ms, _ := filepath.Glob(pat)
		for _, m := range ms {
			add(m)
		}
	}
	return out
}

// covering returns the denied entry p is, or is inside, or "".
func (d denyList) covering(p string) string {
	for q := p; ; q = filepath.Dir(q) {
		for _, e := range d.exact {
			if e == q {
				return e
			}
		}
		for _, e := range d.patterns {
			if ok, _ := filepath.Match(e, q); ok {
				return e
			}
		}
		if q == "/" || q == "." {
			return ""
		}
	}
}

func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// within says whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// exists reports whether p names something (a dangling symlink counts as
// missing).
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
