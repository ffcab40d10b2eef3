package officecrypt

import (
	"os"
	"os/exec"
	"sync"
	"testing"
)

var (
	pythonOnce sync.Once
	pythonPath string
)

// Python returns a Python interpreter with msoffcrypto-tool and openpyxl: $SHEETQ_PYTHON,
// python3 on the PATH, or /usr/bin/python3 (where apt puts them). Without one the test
// skips, except in CI, where .ci/run installs them.
func Python(t *testing.T) string {
	t.Helper()
	pythonOnce.Do(func() {
		for _, c := range []string{os.Getenv("SHEETQ_PYTHON"), "python3", "/usr/bin/python3"} {
			if c == "" {
				continue
			}
			path, err := exec.LookPath(c)
			if err != nil {
				continue
			}
			if exec.Command(path, "-c", "import msoffcrypto, openpyxl").Run() == nil {
				pythonPath = path
				return
			}
		}
	})
	if pythonPath == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no python3 with msoffcrypto-tool and openpyxl (apt-get install python3-msoffcrypto-tool python3-openpyxl)")
		}
		t.Skip("no python3 with msoffcrypto-tool and openpyxl")
	}
	return pythonPath
}
