package main

import (
	"context"
	"strings"
	"testing"
)

// TestRunSmall runs every variant and scenario on a few jobs: each engine must complete
// every job it was given (a lost completion fails the run), and the summary must name
// every variant at every worker count. It checks behaviour only, never a time.
func TestRunSmall(t *testing.T) {
	var out strings.Builder
	err := run(context.Background(), []string{"-n", "20", "-rounds", "1", "-pickups", "3", "-workers", "2,3", "-dir", t.TempDir()}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, v := range []string{"sheetq/w2", "river-default/w2", "river-tuned/w2", "sheetq/w3", "river-tuned/w3"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("output does not name %s:\n%s", v, out.String())
		}
	}
	if !strings.Contains(out.String(), "sheetq (same workers) / variant") {
		t.Errorf("output has no ratio table:\n%s", out.String())
	}
}

func TestRunRejectsUnknownVariant(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-variants", "sidekiq", "-dir", t.TempDir()}, &out); err == nil {
		t.Fatal("run accepted an unknown variant")
	}
}
