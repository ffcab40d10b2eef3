package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		mode fs.FileMode
		want string
	}{
		{fs.ModeNamedPipe | 0o644, "a named pipe"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "a device"},
		{fs.ModeDir | 0o755, "a folder"},
		{fs.ModeSymlink | 0o777, "a link"},
		{fs.ModeIrregular, "mode ?---------"},
	} {
		if got := Of(tc.mode); got != tc.want {
			t.Errorf("Of(%v) = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
