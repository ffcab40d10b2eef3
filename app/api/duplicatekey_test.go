package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	for doc, want := range map[string]string{
		`{"report":"demo","params":{"rows":1}}`:                           "",
		`{"report":"demo","report":"other"}`:                              "report",
		`{"report":"demo","Report":"other"}`:                              "Report",
		`{"params":{"rows":1,"Rows":2}}`:                                  "", // a report's names are exact
		`{"params":{"rows":1,"rows":2}}`:                                  "params.rows",
		`{"deliver":[{"type":"email"},{"type":"email","to":[],"to":[]}]}`: "deliver[1].to",
		`{"a":{"b":{"c":1,"c":2}}}`:                                       "a.b.c",
		`[1,2,{"x":1}]`:                                                   "",
		`not json`:                                                        "",
	} {
		if got := duplicateKey([]byte(doc)); got != want {
			t.Errorf("duplicateKey(%s) = %q, want %q", doc, got, want)
		}
	}
	// The largest body the API reads, all keys: found at the end, in linear time.
	var b strings.Builder
	b.WriteString(`{"params":{`)
	for i := 0; b.Len() < 60<<10; i++ {
		b.WriteString(`"k` + strconv.Itoa(i) + `":0,`)
	}
	b.WriteString(`"k0":1}}`)
	if got := duplicateKey([]byte(b.String())); got != "params.k0" {
		t.Errorf("a 60 KiB body of keys: %q", got)
	}
}

// BenchmarkDuplicateKey is the check's cost on an accepted export's body, beside the
// decoding it follows (BENCHMARKS.md: compare the two as a ratio in one run).
func BenchmarkDuplicateKey(b *testing.B) {
	body := []byte(`{"report":"demo","params":{"rows":2000,"seconds":0}}`)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req createRequest
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			dec.UseNumber()
			if err := dec.Decode(&req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("duplicateKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if duplicateKey(body) != "" {
				b.Fatal("a duplicate")
			}
		}
	})
}
