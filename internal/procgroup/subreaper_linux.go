package procgroup

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// EnableSubreaper makes acpflow the child subreaper of everything it starts
// (Linux PR_SET_CHILD_SUBREAPER), so that a process whose parent dies is
// re-parented to acpflow instead of init and can be found and killed.
//
// # Notes
//
// Call it only in a process whose children are all started through this
// package (the acpflow binary): a teardown that is the only one live
// kills every child of the process that is not a live Child. Call it
// before the first Start: every process acpflow started is then below it
// until it dies, and teardowns read that subtree instead of the whole
// process table (subtree_linux.go); called later, they read the whole
// table, as without it.
func EnableSubreaper() error {
	if err := prctl(prSetChildSubreaper, 1); err != nil {
		return err
	}
	registry.mu.Lock()
	registry.subreaper = true
	registry.subtree = !registry.spawned
	registry.mu.Unlock()
	return nil
}

func prctl(option, arg2 uintptr) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, option, arg2, 0, 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
