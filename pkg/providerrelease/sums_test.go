package providerrelease

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseSums(t *testing.T) {
	in := "ab" + strings.Repeat("0", 62) + "  a.zip\n\n" + strings.Repeat("1", 64) + " *b.zip\r\n"
	s, err := ParseSums(strings.NewReader(in))
	if err != nil || len(s) != 2 || s["b.zip"] != strings.Repeat("1", 64) {
		t.Fatalf("got %v, %v", s, err)
	}
	back, err := ParseSums(bytes.NewReader(s.Bytes()))
	if err != nil || len(back) != 2 || back["a.zip"] != s["a.zip"] {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	for _, bad := range []string{"nohash", "abc  a.zip", strings.Repeat("g", 64) + "  a.zip", strings.Repeat("1", 64) + "  ../a.zip",
		strings.Repeat("1", 64) + "  a.zip\n" + strings.Repeat("2", 64) + "  a.zip"} {
		if _, err := ParseSums(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseSums(%q) accepted it", bad)
		}
	}
}

// FuzzParseSums: any input gives sums or an error; accepted sums render and parse back equal.
func FuzzParseSums(f *testing.F) {
	f.Add(strings.Repeat("a", 64) + "  terraform-provider-x_1.0.0_linux_amd64.zip\n")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSums(strings.NewReader(in))
		if err != nil {
			return
		}
		back, err := ParseSums(strings.NewReader(string(s.Bytes())))
		if err != nil || len(back) != len(s) {
			t.Fatalf("round trip of %q: %v %v", in, back, err)
		}
		for k, v := range s {
			if back[k] != v {
				t.Fatalf("round trip changed %s", k)
			}
		}
	})
}
