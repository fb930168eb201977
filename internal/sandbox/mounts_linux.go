package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// applyMounts shapes the launcher's mount namespace before Landlock (its
// own /proc, /dev/pts and /dev/shm are mountNamespace's): the protected
// paths bound read-only onto themselves
// (git dirs pinned first), and every denied path that exists covered by
// an empty, unreadable, read-only one. Mounts cost microseconds, where
// carving the same holes out of Landlock's grants meant a rule for every
// entry of every directory on the way to HOME (hundreds in /tmp).
//
// The agent can undo none of it: it has no capabilities, Landlock forbids
// mount changes, and a mount point cannot be renamed or removed (EBUSY).
// A protected path that cannot be bound fails the launch: a sandbox that
// quietly kept less would be worse than none.
func applyMounts(s Spec, pr protection) error {
	for _, p := range pr.make {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("keeping %s read-only: %w", p, err)
		}
	}
	for _, p := range pr.pins {
		if err := unix.Mount(p, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pinning the git dir %s: %w", p, err)
		}
	}
	for _, p := range pr.readOnly {
		if err := bindReadOnly(p, p); err != nil {
			return fmt.Errorf("keeping %s read-only: %w", p, err)
		}
	}
	return mask(s.TmpDir, s.denyList().resolved().existing())
}

// bindReadOnly binds src onto dst and makes that mount read-only; the
// mount's other attributes (nosuid, nodev, noexec: locked in a user
// namespace) stay as they were.
func bindReadOnly(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.MountSetattr(unix.AT_FDCWD, dst, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// mask covers each path with an empty directory or file of mode 000 on a
// read-only mount: the agent, which has no capabilities, cannot list,
// read or write it, nor what was there. A directory gets a tmpfs of its
// own; a file gets an empty one bound over it, made on a tmpfs mounted
// for a moment over tmp (the agent's temp dir, which the caller made) and
// detached once bound, when tmp is itself again.
func mask(tmp string, paths []string) error {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			continue // gone since the walk, or a dangling link: nothing to hide
		case !fi.IsDir():
			files = append(files, p)
			continue
		}
		const ro = unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
		if err := unix.Mount("tmpfs", p, "tmpfs", ro, "size=4k,mode=000"); err != nil {
			return fmt.Errorf("denying %s: %w", p, err)
		}
	}
	if len(files) == 0 {
		return nil
	}
	if err := unix.Mount("tmpfs", tmp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=700"); err != nil {
		return fmt.Errorf("mounting the deny list's empty stand-in: %w", err)
	}
	defer unix.Unmount(tmp, unix.MNT_DETACH)
	standIn := filepath.Join(tmp, "f")
	if err := os.WriteFile(standIn, nil, 0); err != nil {
		return err
	}
	for _, p := range files {
		if err := bindReadOnly(standIn, p); err != nil {
			return fmt.Errorf("denying %s: %w", p, err)
		}
	}
	return nil
}
