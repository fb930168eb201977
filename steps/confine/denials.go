package confine

import (
	"github.com/acpflow/acpflow/internal/sandbox"
	"github.com/acpflow/acpflow/steps"
)

// The kernel's part of a sandbox's `denied` (docs/sandbox.md, "What the
// result says was refused"): what Landlock refused the spawn's processes,
// read from the audit log where acpflow can read it. Where it cannot, the
// record says why in kernel_denials and lists the proxy's refusals only;
// nothing is guessed.

// watchKernel starts reading the kernel's refusals for the spawn about to
// start: before it, so that none is missed.
func (c *Confinement) watchKernel() {
	w, err := sandbox.WatchDenials()
	if err != nil {
		c.record.KernelDenials = err.Error()
		return
	}
	c.kernel = w
	c.record.KernelDenials = steps.KernelDenialsAudit
}

// Attach names the spawned launcher: the Landlock domain it makes is the
// spawn's.
func (c *Confinement) Attach(pid int) {
	if c != nil {
		c.kernel.Attach(pid)
	}
}

// withKernelDenials adds what the kernel refused so far to r, a copy of
// the record (the watch's counts are totals since the spawn).
func (c *Confinement) withKernelDenials(r *steps.SandboxRecord) *steps.SandboxRecord {
	if c.kernel == nil {
		return r
	}
	ds := c.kernel.Denials()
	for _, d := range ds.Kinds {
		r.CountDenial(steps.Denial{By: steps.DeniedByLandlock, Op: d.Op, Path: d.Path, Address: d.Address, Process: d.Process, Count: d.Count})
	}
	r.DeniedMore += ds.More
	if ds.Lost {
		r.KernelDenials = steps.KernelDenialsAudit + " (some records were lost before acpflow read them: the counts are a lower bound)"
	}
	return r
}
