package jobs

import "testing"

func TestParsePartName(t *testing.T) {
	for name, want := range map[string]struct {
		id      string
		attempt int
	}{
		"abc.2.part": {"abc", 2}, "abc.part": {"abc", -1}, "a.b.x.part": {"a.b.x", -1}, "j.10.part": {"j", 10},
		PartName("k3x", 7): {"k3x", 7},
	} {
		if id, n := ParsePartName(name); id != want.id || n != want.attempt {
			t.Errorf("ParsePartName(%q) = %q, %d; want %q, %d", name, id, n, want.id, want.attempt)
		}
	}
}
