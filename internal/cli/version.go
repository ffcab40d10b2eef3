package cli

import "runtime/debug"

// versionString is the version plus the commit and build date from build info.
func versionString(version string) string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, at, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			v += " (" + rev + dirty + ", " + at + ")"
		}
	}
	return v
}
