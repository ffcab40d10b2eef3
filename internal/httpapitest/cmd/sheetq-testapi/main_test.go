package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-rows", "7", "-page-size", "3"}, pw) }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		t.Fatalf("first line %q", line)
	}
	resp, err := http.Get(url + "/page/items?page=3")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":7`) || strings.Contains(string(b), `"id":6`) {
		t.Fatalf("page 3 of 7 rows by 3: %s", b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still serving after the cancel")
	}
}

func TestRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-addr", "0.0.0.0:0"}, {"-addr", "192.168.1.1:80"}, {"-page-size", "0"}, {"-rows", "-1"}, {"-delay", "-1s"}} {
		if err := run(t.Context(), args, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
