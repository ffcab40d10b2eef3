package middleware

import "testing"

func TestMatchFindsEachTokenOnly(t *testing.T) {
	a := NewAuth([]Token{{Name: "a", Secret: "one"}, {Name: "b", Secret: "two"}, {Name: "c", Secret: "three"}}, nil, nil)
	for secret, want := range map[string]string{"one": "a", "two": "b", "three": "c", "": "", "thre": "", "onee": ""} {
		if got, ok := a.Match(secret); got != want || ok != (want != "") {
			t.Errorf("match(%q) = %q, %v; want %q", secret, got, ok, want)
		}
	}
}
