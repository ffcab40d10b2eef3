package exports

import (
	"net/http"
	"strings"
	"testing"
)

func TestIdempotencyKeyHeader(t *testing.T) {
	tests := []struct {
		vals []string
		want string
		ok   bool
	}{
		{nil, "", true},
		{[]string{"abc"}, "abc", true},
		{[]string{`"abc"`}, "abc", true},
		{[]string{"  abc  "}, "abc", true},
		{[]string{"a b~!"}, "a b~!", true},
		{[]string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), true},
		{[]string{strings.Repeat("k", 256)}, "", false},
		{[]string{""}, "", false},
		{[]string{`""`}, "", false},
		{[]string{`"a\"b"`}, "", false},
		{[]string{"tab\there"}, "", false},
		{[]string{"naïve"}, "", false},
		{[]string{"a", "a"}, "", false},
	}
	for _, tt := range tests {
		h := http.Header{}
		for _, v := range tt.vals {
			h.Add("Idempotency-Key", v)
		}
		got, ok := IdempotencyKey(h)
		if got != tt.want || ok != tt.ok {
			t.Errorf("IdempotencyKey(%q) = %q, %v; want %q, %v", tt.vals, got, ok, tt.want, tt.ok)
		}
	}
}
