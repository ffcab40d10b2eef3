package main

import (
	"context"
	"errors"
	"os"
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

// TestRunPGSmall runs every PostgreSQL variant and scenario on a few jobs against the
// test server (SHEETQ_TEST_POSTGRES_DSN; skipped without it): each engine must complete
// every job it was given, on one node and on two, and pick up across nodes. It checks
// behaviour only, never a time.
func TestRunPGSmall(t *testing.T) {
	dsn := os.Getenv("SHEETQ_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip(`SHEETQ_TEST_POSTGRES_DSN is not set; eval "$(bash ../../.ci/databases)" to run this test`)
	}
	var out strings.Builder
	err := run(context.Background(), []string{"-pg", dsn, "-n", "30", "-rounds", "1", "-pickups", "3",
		"-nodes", "1,2", "-callers", "4", "-workers", "2"}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, v := range []string{"sheetq-pg", "river-pg", "river-pg-tuned", "sheetq-pg / variant", "e2e 2 node(s)"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("output does not name %s:\n%s", v, out.String())
		}
	}
	t.Log(out.String())
}

func TestRunRejectsPGVariantWithoutDSN(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"-variants", "river-pg", "-dir", t.TempDir()}, &out); !errors.Is(err, errNoPG) {
		t.Fatalf("run: %v, want errNoPG", err)
	}
}

// TestRunMariaDBSmall runs sheetq on MariaDB beside the PostgreSQL variants on a few
// jobs (SHEETQ_TEST_POSTGRES_DSN and SHEETQ_TEST_MYSQL_DSN; skipped without them): every
// job completes on one node and on two, a job crosses nodes by the poll, and both
// servers' raw commit rates are printed. It checks behaviour only, never a time.
func TestRunMariaDBSmall(t *testing.T) {
	dsn, mdsn := os.Getenv("SHEETQ_TEST_POSTGRES_DSN"), os.Getenv("SHEETQ_TEST_MYSQL_DSN")
	if dsn == "" || mdsn == "" {
		t.Skip(`SHEETQ_TEST_POSTGRES_DSN or SHEETQ_TEST_MYSQL_DSN is not set; eval "$(bash ../../.ci/databases)" to run this test`)
	}
	var out strings.Builder
	err := run(context.Background(), []string{"-pg", dsn, "-mysql", mdsn, "-variants", "sheetq-pg,sheetq-mariadb", "-n", "30",
		"-rounds", "1", "-pickups", "3", "-nodes", "1,2", "-callers", "4", "-workers", "2"}, &out)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, v := range []string{"round 1  sheetq-mariadb", "sheetq-mariadb / variant", "MariaDB x4", "MySQL/MariaDB 1"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("output does not name %s:\n%s", v, out.String())
		}
	}
	if err := run(context.Background(), []string{"-mysql", mdsn}, &out); err == nil {
		t.Error("run took -mysql without -pg")
	}
	t.Log(out.String())
}
