// Command acceptfloor measures what accepting an export costs on a machine when nothing
// but HTTP and, with -sync, the disk stands behind the answer. It answers the part of
// sheetq's API that `sheetq loadtest` uses (POST /api/v1/exports with a 202 and an id,
// GET /api/v1/exports, a quiet GET /api/v1/events), and with -sync it answers a request
// only after bytes standing for its job have been written and fsynced, in group commits
// as sheetq's store makes them. The figures it gives under the burst profile are the
// floor any durable accept can reach there, to set beside sheetq's (BENCHMARKS.md):
//
//	go run ./bench/acceptfloor -sync append        # prints: listening url=http://...
//	sheetq loadtest --server URL --profile burst --drain-timeout 1s --allow-errors
//
// The load test's check then fails (no job ever finishes); its accept latencies are
// the result. -sync off answers at once; append writes each batch at the end of a
// growing file, as a WAL does before its first checkpoint; overwrite writes over a
// preallocated ring, as a WAL does once it restarts after a checkpoint.
package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen `address`")
	mode := flag.String("sync", "off", "what stands behind a 202: off, append or overwrite")
	dir := flag.String("dir", "", "`folder` for the synced file, on the disk to measure (default: the system's temp folder)")
	per := flag.Int("bytes", 32<<10, "bytes written per accepted request (one sheetq job is about 8 WAL frames of 4,120 bytes)")
	flag.Parse()
	if err := run(*addr, *mode, *dir, *per); err != nil {
		fmt.Fprintln(os.Stderr, "acceptfloor:", err)
		os.Exit(1)
	}
}

func run(addr, mode, dir string, per int) error {
	c, err := newCommitter(mode, dir, per)
	if err != nil {
		return err
	}
	// The committer is not closed: handlers may still be waiting on it when the server
	// closes, and the process ends right after.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: handler(c)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	// The line sheetq serve logs, so that scripts that wait for a server find this one.
	slog.New(slog.NewTextHandler(os.Stderr, nil)).Info("listening", "url", "http://"+ln.Addr().String(), "sync", mode)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler serves the load test's requests; c (nil for -sync off) makes each 202 wait
// for its request's bytes to be on disk.
func handler(c *committer) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/exports", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jobs":[]}`)
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("POST /api/v1/exports", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Report string         `json:"report"`
			Params map[string]any `json:"params"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Report == "" {
			http.Error(w, "want a JSON object with a report", http.StatusBadRequest)
			return
		}
		if c != nil {
			if err := c.commit(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]string{"id": rand.Text(), "status": "PENDING", "report": req.Report})
	})
	return mux
}
