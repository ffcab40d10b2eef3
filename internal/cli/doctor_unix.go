//go:build unix

package cli

import "golang.org/x/sys/unix"

// diskFree is the space an unprivileged process may still use in the file system
// holding path.
func diskFree(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
