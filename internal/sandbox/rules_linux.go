package sandbox

import (
	"os"
	"path/filepath"
	"sort"
)

// Rights granted by the rules. Landlock can only add rights to what a
// ruleset handles; everything else it handles is denied.
const (
	readRights = fsExecute | fsReadFile | fsReadDir
	// writeRights include Refer, without which a rename or link across two
	// directories fails with EXDEV (git moves objects so), and ResolveUnix
	// (ABI 9), so the agent's own directories may hold sockets it connects
	// to.
	writeRights = readRights | fsWriteFile | fsRemoveDir | fsRemoveFile |
		fsMakeChar | fsMakeDir | fsMakeReg | fsMakeSock | fsMakeFifo | fsMakeBlock | fsMakeSym |
		fsRefer | fsTruncate | fsResolveUnix
	// fileRights are those the kernel accepts on a rule for a non-directory.
	fileRights = fsExecute | fsWriteFile | fsReadFile | fsTruncate | fsIoctlDev
	// ttyRights add terminal ioctls (TCGETS, TIOCGWINSZ) for the ptys an
	// agent opens itself; Landlock (ABI 5) refuses ioctls on devices opened
	// in the sandbox unless granted.
	ttyRights = writeRights | fsIoctlDev
)

// devices are the character devices and directories under /dev an agent
// writes to: sinks and sources every shell uses, its own ptys (on the
// private devpts the launcher mounts), and POSIX shared memory.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// grants is the filesystem half of a sandbox: path → rights.
type grants struct {
	// splits are directories whose top gains no new entry (protection's
	// splits), frozen seals those and the protected and denied paths,
	// which a split's enumeration skips.
	splits []string
	frozen func(string) bool
	rules  map[string]access
}

// fsGrants returns the rules for spec: everything readable, the writable
// paths writable. What stays unreadable or read-only inside them is the
// mounts' work (applyMounts), except where a protected path is missing:
// a mount needs something to cover, so the directory that would hold it
// is split instead. Landlock grants a right to a whole hierarchy and
// cannot take one away below it, so a split directory keeps only the read
// that / gives, and each of its entries is granted whole, or split in
// turn, the protected and denied ones skipped: the agent can write below
// its entries, but not create new ones at its top (no ~/.bashrc in a
// writable HOME that had none). It runs in the launcher, after the mounts.
func fsGrants(s Spec, pr protection) grants {
	deny := s.denyList()
	ro := map[string]bool{}
	for _, p := range pr.readOnly {
		ro[p] = true
	}
	g := grants{
		splits: pr.splits,
		frozen: func(p string) bool { return ro[p] || deny.covering(p) != "" },
		rules:  map[string]access{},
	}
	g.add("/", readRights)
	for _, p := range s.writable() {
		g.grant(p, writeRights)
	}
	for _, p := range devices {
		if exists(p) {
			g.add(p, ttyRights)
		}
	}
	return g
}

// grant gives rights to p's hierarchy, splitting it where it is or holds a
// split directory.
func (g grants) grant(p string, rights access) {
	if !g.splitAt(p) {
		g.add(p, rights)
		return
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return
	}
	for _, e := range entries {
		// A symlink needs no rule: access is checked on what it
		// resolves to, which has its own.
		q := filepath.Join(p, e.Name())
		if e.Type()&os.ModeSymlink != 0 || g.frozen(q) {
			continue
		}
		g.grant(q, rights)
	}
}

// splitAt says whether p is a split directory or holds one below.
func (g grants) splitAt(p string) bool {
	for _, s := range g.splits {
		if within(s, p) {
			return true
		}
	}
	return false
}

func (g grants) add(p string, rights access) {
	g.rules[p] |= rights
}

// addTo adds the grants to rs, masking a non-directory's rights to those
// a file can carry. A path that vanished since the walk is skipped.
func (g grants) addTo(rs *ruleset) error {
	paths := make([]string, 0, len(g.rules))
	for p := range g.rules {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		rights := g.rules[p]
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if !fi.IsDir() {
			rights &= fileRights
		}
		if err := rs.allowPath(p, rights); err != nil {
			return err
		}
	}
	return nil
}
