package sandbox

import (
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// What the kernel refused a sandbox (docs/sandbox.md, "What the result
// says was refused"): Landlock ABI 7 writes each denial to the audit log
// as a LANDLOCK_ACCESS record naming the domain (the ruleset one
// landlock_restrict_self made), what was blocked and on what; the first
// denial of a domain also gets a LANDLOCK_DOMAIN record naming the
// process that made the domain. The launcher makes one domain per spawn,
// so "made by the launcher's pid" picks a spawn's records out of all the
// others', whoever else runs sandboxes at the same time.

// Audit record types (linux/audit.h).
const (
	auditLandlockAccess = 1423
	auditLandlockDomain = 1424
)

// Denial is one kind of access the kernel refused a sandbox's processes,
// and how many times.
type Denial struct {
	// Op is what was refused: read, write, create, remove, rename,
	// execute, truncate, ioctl, connect, bind, kill, or the kernel's own
	// name of a right acpflow does not know (several joined with ",").
	Op string
	// Path, Address or Process is what it was refused on: a file or
	// directory (for create and remove, the directory), an address
	// (ip:port, or @name for an abstract Unix socket), a process outside
	// the sandbox ("NAME (pid N)").
	Path, Address, Process string
	Count                  int
}

// maxDenialKinds bounds the kinds a watch counts per spawn; refusals of
// kinds beyond them are counted in More.
const maxDenialKinds = 100

// maxDomains bounds the domains a watch keeps while it does not know whose
// they are: other programs' sandboxes, or this spawn's before Attach.
const maxDomains = 256

// Denials is what a watch counted for its spawn.
type Denials struct {
	Kinds []Denial
	// More counts the refusals of kinds beyond the first maxDenialKinds.
	More int
	// Lost says that records were dropped before acpflow read them (its
	// socket's buffer overflowed): the counts are then a lower bound.
	Lost bool
}

// landlockOps names Landlock's access rights as a Denial's Op.
var landlockOps = map[string]string{
	"fs.execute": "execute", "fs.write_file": "write", "fs.read_file": "read", "fs.read_dir": "read",
	"fs.remove_dir": "remove", "fs.remove_file": "remove",
	"fs.make_char": "create", "fs.make_dir": "create", "fs.make_reg": "create", "fs.make_sock": "create",
	"fs.make_fifo": "create", "fs.make_block": "create", "fs.make_sym": "create",
	"fs.refer": "rename", "fs.truncate": "truncate", "fs.ioctl_dev": "ioctl",
	"net.bind_tcp": "bind", "net.connect_tcp": "connect",
	"scope.abstract_unix_socket": "connect", "scope.signal": "kill",
}

// domainLog is what a watch knows of one Landlock domain.
type domainLog struct {
	maker int // the pid that made it; 0 until its LANDLOCK_DOMAIN record
	seen  int // when first seen, in records: the oldest unclaimed goes first
	d     Denials
}

// denialLog sorts audit records by domain and counts each domain's
// denials; the platform's watch feeds it.
type denialLog struct {
	mu      sync.Mutex
	pid     int // the launcher's, from Attach; 0 before
	domains map[string]*domainLog
	records int
	lost    bool
	last    time.Time // when a record last arrived
}

// add takes one audit record: its type and text.
func (l *denialLog) add(typ int, text string) {
	if typ != auditLandlockAccess && typ != auditLandlockDomain {
		return
	}
	f := auditFields(text)
	id := f["domain"]
	if id == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = time.Now()
	l.records++
	dl := l.domains[id]
	if dl == nil {
		if l.domains == nil {
			l.domains = map[string]*domainLog{}
		}
		l.evict()
		dl = &domainLog{seen: l.records}
		l.domains[id] = dl
	}
	if typ == auditLandlockDomain {
		switch f["status"] {
		case "allocated":
			dl.maker, _ = strconv.Atoi(f["pid"])
		case "deallocated":
			if dl.maker != l.pid || l.pid == 0 {
				delete(l.domains, id) // ended, and not this spawn's
			}
		}
		return
	}
	dl.d.count(denialOf(f))
}

// evict makes room for one more domain, dropping the oldest whose maker
// is not the launcher.
func (l *denialLog) evict() {
	if len(l.domains) < maxDomains {
		return
	}
	oldest, at := "", 0
	for id, dl := range l.domains {
		if (dl.maker != l.pid || l.pid == 0) && (oldest == "" || dl.seen < at) {
			oldest, at = id, dl.seen
		}
	}
	delete(l.domains, oldest)
}

// count adds one refusal of d's kind.
func (ds *Denials) count(d Denial) {
	for i := range ds.Kinds {
		k := &ds.Kinds[i]
		if k.Op == d.Op && k.Path == d.Path && k.Address == d.Address && k.Process == d.Process {
			k.Count += d.Count
			return
		}
	}
	if len(ds.Kinds) >= maxDenialKinds {
		ds.More += d.Count
		return
	}
	ds.Kinds = append(ds.Kinds, d)
}

// snapshot is what the launcher's domains counted so far.
func (l *denialLog) snapshot() Denials {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := Denials{Lost: l.lost}
	if l.pid == 0 {
		return out
	}
	ids := make([]string, 0, len(l.domains))
	for id, dl := range l.domains {
		if dl.maker == l.pid {
			ids = append(ids, id)
		}
	}
	// In the order first seen, so that the kinds keep theirs.
	slices.SortFunc(ids, func(a, b string) int { return l.domains[a].seen - l.domains[b].seen })
	for _, id := range ids {
		d := l.domains[id].d
		for _, k := range d.Kinds {
			out.count(k)
		}
		out.More += d.More
	}
	return out
}

// denialOf reads a LANDLOCK_ACCESS record's fields: blockers=RIGHT[,RIGHT]
// and the object, as the kernel's LSM audit data gives it (path= or
// name=, daddr= and dest=, saddr= and src=, opid= and ocomm=).
func denialOf(f map[string]string) Denial {
	var ops []string
	for _, b := range strings.Split(f["blockers"], ",") {
		op, ok := landlockOps[b]
		if !ok {
			op = b
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	d := Denial{Op: strings.Join(ops, ","), Count: 1}
	switch {
	case f["path"] != "":
		d.Path = f["path"]
	case f["name"] != "":
		d.Path = f["name"]
	case f["daddr"] != "":
		d.Address = joinHostPort(f["daddr"], f["dest"])
	case f["saddr"] != "":
		d.Address = joinHostPort(f["saddr"], f["src"])
	case f["opid"] != "":
		d.Process = f["ocomm"] + " (pid " + f["opid"] + ")"
	}
	return d
}

// auditFields splits an audit record's text ("audit(T:N): k=v k=\"v\"
// k=HEX ...") into its fields. A quoted value is taken as it is; an
// unquoted one of the fields that carry names (path, name, comm, ocomm,
// exe) is hex, which the kernel writes for a name with spaces, quotes or
// bytes outside ASCII.
func auditFields(text string) map[string]string {
	if _, rest, ok := strings.Cut(text, "): "); ok && strings.HasPrefix(text, "audit(") {
		text = rest
	}
	f := map[string]string{}
	for text != "" {
		text = strings.TrimLeft(text, " ")
		k, rest, ok := strings.Cut(text, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				end = len(rest) - 1
			}
			v, text = rest[1:1+end], rest[min(len(rest), end+2):]
		} else {
			v, text, _ = strings.Cut(rest, " ")
			if hexNamed[k] {
				if b, err := hex.DecodeString(v); err == nil {
					v = string(b)
				}
			}
		}
		f[k] = v
	}
	return f
}

var hexNamed = map[string]bool{"path": true, "name": true, "comm": true, "ocomm": true, "exe": true}

// joinHostPort is net.JoinHostPort, which this package cannot import: the
// net package brings cgo's resolver, and with it a dynamically linked
// launcher that starts slower (DESIGN.md, "The launcher speaks Landlock
// itself").
func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
