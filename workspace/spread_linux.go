package workspace

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopdirFlag is FS_TOPDIR_FL of linux/fs.h: "top of directory
// hierarchies".
const fsTopdirFlag = 0x00020000

// setSpread sets (on) or clears the TOPDIR flag of ext2/3/4 on dir, the
// hint that its subdirectories are unrelated to each other: with it the
// file system places each new subdirectory, and the files under it, in
// block groups of its own (those holding the fewest directories) instead
// of beside its siblings. A file system without the flag returns an error
// and keeps its own placement.
func setSpread(dir string, on bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil || (flags&fsTopdirFlag != 0) == on {
		return err
	}
	if on {
		flags |= fsTopdirFlag
	} else {
		flags &^= fsTopdirFlag
	}
	return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags))
}

// spreads reports whether dir carries the TOPDIR flag.
func spreads(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	return flags&fsTopdirFlag != 0, err
}
