package steps

import (
	"fmt"
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
	// Network is NetworkOn, NetworkOff or NetworkList (Allow the hosts).
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
	// Network is on, off or list; Allow the hosts of a list, reached
	// through the step's proxy.
	Network string   `json:"network"`
	Allow   []string `json:"allow,omitempty"`
	// Refused are the hosts the proxy refused, in order (at most 100).
	Refused []string `json:"refused,omitempty"`
	Warning string   `json:"warning,omitempty"`
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
