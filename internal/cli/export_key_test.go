package cli

import (
	"os"
	"testing"
)

// An identical export command finds the key its interrupted run stored, a different
// one does not, and once a run is done the same command gets a new key.
func TestPendingKeyResumesOnlyTheSameRequest(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	params := map[string]string{"rows": "5", "seconds": "1"}
	first := loadPendingKey("http://127.0.0.1:8080/", "demo", params)
	if first.Resumed || first.Key == "" || first.path == "" {
		t.Fatalf("first run: %+v", first)
	}
	again := loadPendingKey("http://127.0.0.1:8080", "demo", map[string]string{"seconds": "1", "rows": "5"})
	if !again.Resumed || again.Key != first.Key {
		t.Fatalf("same server, report and params: %+v, want key %s resumed", again, first.Key)
	}
	for _, other := range []pendingKey{
		loadPendingKey("http://127.0.0.1:8081", "demo", params),
		loadPendingKey("http://127.0.0.1:8080", "sales", params),
		loadPendingKey("http://127.0.0.1:8080", "demo", map[string]string{"rows": "6", "seconds": "1"}),
	} {
		if other.Resumed || other.Key == first.Key {
			t.Errorf("another request got the first one's key: %+v", other)
		}
		other.done()
	}
	again.done()
	if _, err := os.Stat(first.path); !os.IsNotExist(err) {
		t.Fatalf("done left the key file: %v", err)
	}
	if next := loadPendingKey("http://127.0.0.1:8080", "demo", params); next.Resumed || next.Key == first.Key {
		t.Fatalf("after done: %+v, want a new key", next)
	}
}
