package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"sheetq/store"
)

// A job records the name of the token that created it; a job created without one has
// none. Both survive a fresh read and a claim (every RETURNING scans the column).
func TestEnqueueRecordsCreatedBy(t *testing.T) {
	st, _ := openStore(t, store.Options{})
	j := enqueue(t, st, store.NewJob{CreatedBy: "ci"})
	if j.CreatedBy != "ci" {
		t.Fatalf("enqueued CreatedBy = %q, want ci", j.CreatedBy)
	}
	if got := get(t, st, j.ID); got.CreatedBy != "ci" {
		t.Fatalf("read back CreatedBy = %q, want ci", got.CreatedBy)
	}
	if c := claim(t, st, "w1"); c.ID != j.ID || c.CreatedBy != "ci" {
		t.Fatalf("claimed %s with CreatedBy %q, want %s with ci", c.ID, c.CreatedBy, j.ID)
	}
	if anon := enqueue(t, st, store.NewJob{}); anon.CreatedBy != "" || get(t, st, anon.ID).CreatedBy != "" {
		t.Fatalf("a job without a token has CreatedBy %q", anon.CreatedBy)
	}
}

// With a base URL, a webhook payload's download link is absolute, so a receiver can
// fetch the file; without one it stays a path.
func TestWebhookPayloadLinkUsesBaseURL(t *testing.T) {
	ctx := context.Background()
	for _, base := range []string{"", "https://sheetq.example.com"} {
		st, _ := openStore(t, store.Options{BaseURL: base})
		j := enqueue(t, st, store.NewJob{Kind: "export", Args: json.RawMessage(`{"report":"demo"}`),
			WebhookURL: "https://hooks.example.com/x"})
		claim(t, st, "w")
		if _, err := st.Succeed(ctx, j.ID, 1, store.FileResult{Name: "f.xlsx", Size: 1, SHA256: "ab"}, nil); err != nil {
			t.Fatal(err)
		}
		d := deliveries(t, st)
		if len(d) != 1 {
			t.Fatalf("base %q: %d deliveries, want 1", base, len(d))
		}
		var p struct {
			Data struct {
				DownloadURL string `json:"download_url"`
			} `json:"data"`
		}
		if err := json.Unmarshal(webhookArgs(t, d[0]).Payload, &p); err != nil {
			t.Fatal(err)
		}
		if want := base + "/api/v1/exports/" + j.ID + "/file"; p.Data.DownloadURL != want {
			t.Errorf("base %q: download_url %q, want %q", base, p.Data.DownloadURL, want)
		}
	}
}
