package cli

import (
	"os"
	"testing"

	"sheetq/internal/client"
)

// req is an export request of report with params.
func req(report string, params map[string]string) client.ExportRequest {
	return client.ExportRequest{Report: report, Params: params}
}

// An identical export command finds the key its interrupted run stored, a different
// one (another server, report, params, format or BOM) does not, and once a run is done
// the same command gets a new key. Naming the default format, xlsx, is the same request.
func TestPendingKeyResumesOnlyTheSameRequest(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	params := map[string]string{"rows": "5", "seconds": "1"}
	first := loadPendingKey("http://127.0.0.1:8080/", req("demo", params))
	if first.Resumed || first.Key == "" || first.path == "" {
		t.Fatalf("first run: %+v", first)
	}
	again := loadPendingKey("http://127.0.0.1:8080", req("demo", map[string]string{"seconds": "1", "rows": "5"}))
	if !again.Resumed || again.Key != first.Key {
		t.Fatalf("same server, report and params: %+v, want key %s resumed", again, first.Key)
	}
	for _, other := range []pendingKey{
		loadPendingKey("http://127.0.0.1:8081", req("demo", params)),
		loadPendingKey("http://127.0.0.1:8080", req("sales", params)),
		loadPendingKey("http://127.0.0.1:8080", req("demo", map[string]string{"rows": "6", "seconds": "1"})),
		loadPendingKey("http://127.0.0.1:8080", client.ExportRequest{Report: "demo", Params: params, Format: "csv"}),
		loadPendingKey("http://127.0.0.1:8080", client.ExportRequest{Report: "demo", Params: params, Format: "csv", BOM: true}),
	} {
		if other.Resumed || other.Key == first.Key {
			t.Errorf("another request got the first one's key: %+v", other)
		}
		other.done()
	}
	if named := loadPendingKey("http://127.0.0.1:8080", client.ExportRequest{Report: "demo", Params: params, Format: "xlsx"}); !named.Resumed || named.Key != first.Key {
		t.Fatalf("the default format named: %+v, want key %s resumed", named, first.Key)
	}
	again.done()
	if _, err := os.Stat(first.path); !os.IsNotExist(err) {
		t.Fatalf("done left the key file: %v", err)
	}
	if next := loadPendingKey("http://127.0.0.1:8080", req("demo", params)); next.Resumed || next.Key == first.Key {
		t.Fatalf("after done: %+v, want a new key", next)
	}
}

// Kept formulas are another file, so another request: a csv command with
// --csv-formulas keep does not resume the key of one without, while naming the default,
// neutralise, is the same request as naming nothing.
func TestPendingKeyCoversCSVFormulas(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	csvReq := func(formulas string) client.ExportRequest {
		return client.ExportRequest{Report: "demo", Params: map[string]string{"rows": "5"}, Format: "csv", CSVFormulas: formulas}
	}
	first := loadPendingKey("http://127.0.0.1:8080", csvReq(""))
	if first.Resumed || first.path == "" {
		t.Fatalf("first run: %+v", first)
	}
	if named := loadPendingKey("http://127.0.0.1:8080", csvReq("neutralise")); !named.Resumed || named.Key != first.Key {
		t.Fatalf("neutralise named: %+v, want key %s resumed", named, first.Key)
	}
	kept := loadPendingKey("http://127.0.0.1:8080", csvReq("keep"))
	if kept.Resumed || kept.Key == first.Key {
		t.Fatalf("keep: %+v got the first one's key", kept)
	}
	if again := loadPendingKey("http://127.0.0.1:8080", csvReq("keep")); !again.Resumed || again.Key != kept.Key {
		t.Fatalf("keep again: %+v, want key %s resumed", again, kept.Key)
	}
}
