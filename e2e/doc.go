// Package e2e holds the end-to-end tests: they build the sheetq binary once (with
// -tags faultpoints, so that SHEETQ_FAULT can make it kill itself at a named point) and
// drive it as a user, a service manager or a crash would: crash and kill matrices,
// restarts, signals, the pages in headless Chromium, the CLI on a pseudo-terminal, a
// second launch, the load test. Tests of one package's logic live beside it; these need
// the whole process (ARCHITECTURE.md, "Parts").
package e2e
