package sandbox

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Rights granted by the rules. Landlock can only add rights to what a
// ruleset handles; everything else it handles is denied.
const (
	readRights landlock.AccessFSSet = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	// writeRights include Refer, without which a rename or link across two
	// directories fails with EXDEV (git moves objects so), and ResolveUnix
	// (ABI 9), so the agent's own directories may hold sockets it connects
	// to.
	writeRights = readRights | ll.AccessFSWriteFile | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar | ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer |
		ll.AccessFSTruncate | ll.AccessFSResolveUnix
	// fileRights are those the kernel accepts on a rule for a non-directory.
	fileRights landlock.AccessFSSet = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
		ll.AccessFSTruncate | ll.AccessFSIoctlDev
	// ttyRights add terminal ioctls (TCGETS, TIOCGWINSZ) for the ptys an
	// agent opens itself; Landlock (ABI 5) refuses ioctls on devices opened
	// in the sandbox unless granted.
	ttyRights = writeRights | ll.AccessFSIoctlDev
)

// devices are the character devices and directories under /dev an agent
// writes to: sinks and sources every shell uses, its own ptys (on the
// private devpts the launcher mounts), and POSIX shared memory.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// grants is the filesystem half of a sandbox: path → rights, built from
// a Spec by walking the real tree.
type grants struct {
	deny  denyList
	rules map[string]landlock.AccessFSSet
}

// fsGrants returns the rules for spec. It reads the directories that
// hold a denied entry (/, HOME, …), so it runs in the launcher, after its
// own /proc and /dev/pts are mounted and before Landlock is applied.
//
// Landlock grants a right to a whole file hierarchy and cannot take one
// away below it, so "read everything except the deny list" is built by
// enumeration: each directory that holds a denied entry is itself granted
// only listing (ReadDir, which then reaches below it: the names in ~/.ssh
// can be listed, never read), and each of its entries is granted whole or
// enumerated in turn, the denied ones skipped. An entry created later
// directly in such a directory (a new ~/.netrc) is covered by no rule and
// so stays unreadable. The same walk splits a writable directory that
// holds a denied entry (cwd = HOME): the agent can then write below its
// entries, but not create new ones at its top.
func fsGrants(s Spec) grants {
	g := grants{deny: s.denyList().resolved(), rules: map[string]landlock.AccessFSSet{}}
	g.grant("/", readRights)
	writable := append([]string{s.Cwd, s.TmpDir}, s.Write...)
	for _, p := range s.StateDirs {
		if exists(p) {
			writable = append(writable, p)
		}
	}
	for _, p := range writable {
		g.grant(filepath.Clean(p), writeRights)
	}
	for _, p := range devices {
		if exists(p) {
			g.add(p, ttyRights)
		}
	}
	return g
}

// grant gives rights to p's hierarchy, splitting it where it holds a
// denied entry.
func (g grants) grant(p string, rights landlock.AccessFSSet) {
	if g.deny.covering(p) != "" {
		return
	}
	if !g.deny.holds(p) {
		g.add(p, rights)
		return
	}
	g.add(p, ll.AccessFSReadDir)
	entries, err := os.ReadDir(p)
	if err != nil {
		return
	}
	for _, e := range entries {
		// A symlink needs no rule: access is checked on what it
		// resolves to, which has its own. A rule on it would instead
		// grant its target whole, denied entries and all.
		if e.Type()&os.ModeSymlink != 0 {
			continue
		}
		g.grant(filepath.Join(p, e.Name()), rights)
	}
}

func (g grants) add(p string, rights landlock.AccessFSSet) {
	g.rules[p] |= rights
}

// landlockRules turns the grants into go-landlock rules, masking a
// non-directory's rights to those a file can carry. A path that vanished
// since the walk is skipped.
func (g grants) landlockRules() []landlock.Rule {
	paths := make([]string, 0, len(g.rules))
	for p := range g.rules {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	rules := make([]landlock.Rule, 0, len(paths))
	for _, p := range paths {
		rights := g.rules[p]
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			rights &= fileRights
		}
		rules = append(rules, landlock.PathAccess(rights, p).IgnoreIfMissing())
	}
	return rules
}
