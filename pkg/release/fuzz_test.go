package release

import (
	"strings"
	"testing"
)

// FuzzParseFilename: an accepted name renders back to itself, so names and parsed values agree.
func FuzzParseFilename(f *testing.F) {
	for _, s := range []string{"terraform-provider-hello_1.0.0_linux_amd64.zip", "terraform-provider-a-b_1.0.0-rc.1+x_windows_arm64.zip", "hello.zip", "terraform-provider-x_1_2_3_4.zip"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		fn, err := ParseFilename(name)
		if err != nil {
			return
		}
		if fn.String() != name {
			t.Fatalf("%q parsed as %+v, which renders as %q", name, fn, fn.String())
		}
	})
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
