// Package filekind names the type of a file that is not a regular one, for messages that
// tell a person why sheetq refused it (a csv source, doctor's check of exports/).
package filekind

import "io/fs"

// Of names the type of mode for a person: "a named pipe", "a socket", "a device",
// "a folder", "a link"; any other mode is named by its bits.
func Of(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSymlink != 0:
		return "a link"
	}
	return "mode " + m.String()
}
