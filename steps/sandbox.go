package steps

import (
	"fmt"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

// Sandbox is what `sandbox:` asks of the confinement of an agent or a
// shell step's command (docs/sandbox.md; confine.Parse reads it): the
// kernel (Landlock and namespaces) holds the process's whole group to it,
// whatever the agent asks or runs unasked.
type Sandbox struct {
	// Write are paths writable besides the step's cwd, a private temp
	// dir and the preset's state dirs; relative ones are the workspace's.
	Write []string `json:"write,omitempty"`
	// Deny are paths unreadable besides the default list (ssh, gpg,
	// cloud, registry and agents' credentials).
	Deny []string `json:"deny,omitempty"`
	// Network is NetworkOn, NetworkOff, NetworkList (Allow the hosts) or
	// NetworkGateway.
	Network string   `json:"network"`
	Allow   []string `json:"allow,omitempty"`
	// Optional: a kernel that cannot enforce it runs the agent
	// unsandboxed, with a warning (`required: false`); else the step fails
	// before the spawn.
	Optional bool `json:"optional,omitempty"`
}

// Network modes of a sandbox.
const (
	NetworkOn   = "on"
	NetworkOff  = "off"
	NetworkList = "list"
	// NetworkGateway is off but for the step's model gateway, at the
	// same 127.0.0.1 address as outside the sandbox: only an agent with
	// gateway: has one.
	NetworkGateway = "gateway"
)

// String describes the sandbox for messages.
func (s *Sandbox) String() string {
	if s == nil {
		return "none"
	}
	net := s.Network
	if net == NetworkList {
		net = strings.Join(s.Allow, ", ")
	}
	return fmt.Sprintf("write %v, deny %v, network %s", s.Write, s.Deny, net)
}

// SandboxRecord is what a step's sandbox enforced (the result's
// `sandbox`): the kernel's part and the lists, or, for `required: false`
// on a kernel that could not enforce it, nothing and the warning.
type SandboxRecord struct {
	// Enforced is false when the agent ran unsandboxed (Warning says why).
	Enforced bool `json:"enforced"`
	// LandlockABI is the kernel's Landlock ABI version that enforced it.
	LandlockABI int `json:"landlock_abi,omitempty"`
	// Write are the writable paths: the cwd, the private temp dir, the
	// preset's state dirs and write:.
	Write []string `json:"write,omitempty"`
	// Deny are the unreadable paths: the default list and deny:.
	Deny []string `json:"deny,omitempty"`
	// Network is on, off, list or gateway; Allow the hosts of a list, reached
	// through the step's proxy.
	Network string   `json:"network"`
	Allow   []string `json:"allow,omitempty"`
	// Refused are the hosts the proxy refused, in order (at most 100).
	Refused []string `json:"refused,omitempty"`
	// Denied is what the sandbox refused, one entry per kind (who
	// refused, the operation and its target) with how often, in the order
	// first seen: the proxy's refusals always, the kernel's where it
	// reports them (KernelDenials says whether it did). At most MaxDenied
	// entries; DeniedMore counts the refusals of the kinds beyond them.
	Denied     []Denial `json:"denied,omitempty"`
	DeniedMore int      `json:"denied_more,omitempty"`
	// KernelDenials says whether Denied holds the kernel's refusals:
	// "audit" when they were read from the audit log, else why not.
	KernelDenials string `json:"kernel_denials,omitempty"`
	Warning       string `json:"warning,omitempty"`
}

// Denial is one kind of access a sandbox refused, and how often.
//
// # Notes
//
// It names where the agent wanted to go (a host, a path, an address, a
// process), never what it sent or read.
type Denial struct {
	// By is who refused: DeniedByProxy or DeniedByLandlock.
	By string `json:"by"`
	// Op is the operation: connect, bind, read, write, create, remove,
	// rename, execute, truncate, ioctl, kill, or the kernel's own name
	// for one acpflow does not know.
	Op string `json:"op"`
	// Host is the host:port the proxy was asked for.
	Host string `json:"host,omitempty"`
	// Path is the file or directory refused (for create and remove, the
	// directory the entry was to be made in or removed from).
	Path string `json:"path,omitempty"`
	// Address is a network address (ip:port) or an abstract Unix socket.
	Address string `json:"address,omitempty"`
	// Process is the process outside the sandbox a signal was refused to
	// ("NAME (pid N)", N as acpflow sees it).
	Process string `json:"process,omitempty"`
	Count   int    `json:"count"`
}

// KernelDenialsAudit is SandboxRecord.KernelDenials when the kernel's
// refusals were read from the audit log.
const KernelDenialsAudit = "audit"

// Who refused a Denial.
const (
	DeniedByProxy    = "proxy"
	DeniedByLandlock = "landlock"
)

// MaxDenied bounds the kinds of refusal a SandboxRecord lists, and
// maxRefused the hosts it keeps in Refused: an agent in a loop must not
// grow the result without end.
const (
	MaxDenied  = 100
	maxRefused = 100
)

// ProxyRefused records one request the step's proxy refused, for host
// (host:port): in Refused (once, in order) and counted in Denied.
func (r *SandboxRecord) ProxyRefused(host string) {
	if len(r.Refused) < maxRefused && !slices.Contains(r.Refused, host) {
		r.Refused = append(r.Refused, host)
	}
	r.CountDenial(Denial{By: DeniedByProxy, Op: "connect", Host: host, Count: 1})
}

// CountDenial adds d.Count refusals of d's kind: to its entry in Denied,
// a new entry while there are fewer than MaxDenied, else to DeniedMore.
func (r *SandboxRecord) CountDenial(d Denial) {
	if d.Count < 1 {
		d.Count = 1
	}
	for i := range r.Denied {
		if r.Denied[i].sameKind(d) {
			r.Denied[i].Count += d.Count
			return
		}
	}
	if len(r.Denied) >= MaxDenied {
		r.DeniedMore += d.Count
		return
	}
	r.Denied = append(r.Denied, d)
}

func (d Denial) sameKind(o Denial) bool {
	d.Count, o.Count = 0, 0
	return d == o
}

// Clone is a copy of r that shares no list with it: r may still grow
// while the copy is recorded.
func (r *SandboxRecord) Clone() *SandboxRecord {
	c := *r
	c.Write, c.Deny, c.Allow = slices.Clone(r.Write), slices.Clone(r.Deny), slices.Clone(r.Allow)
	c.Refused, c.Denied = slices.Clone(r.Refused), slices.Clone(r.Denied)
	return &c
}

// Target is what d was refused on: its host, path, address or process.
func (d Denial) Target() string {
	for _, t := range []string{d.Host, d.Path, d.Address, d.Process} {
		if t != "" {
			return t
		}
	}
	return ""
}

// SandboxChecker is a prepared step that may run sandboxed: before
// anything runs (`validate`, `run`), it checks the paths its sandbox would
// make writable that the file fixes (a write: entry, a cwd written
// without ${{ }}) against what the sandbox denies, on the filesystem as it
// is: a symlink into ~/.ssh is refused there, not at the spawn.
type SandboxChecker interface {
	// CheckSandbox returns nil when the step would run unsandboxed or its
	// paths pass; else a *FieldError at the step's value at fault.
	CheckSandbox(c SandboxCheck) error
}

// SandboxCheck is where a workflow's sandboxes are checked.
type SandboxCheck struct {
	// Workspace is what relative paths are relative to (absolute).
	Workspace string
	// Outer is the outer policy (a `sandbox: required` sandboxes every
	// step); Sandbox the workflow's default (Invocation.Sandbox) and
	// StateFiles acpflow's own files (Invocation.StateFiles).
	Outer      policies.Outer
	Sandbox    *Sandbox
	StateFiles []string
}
