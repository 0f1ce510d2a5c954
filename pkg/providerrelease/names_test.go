package providerrelease

import (
	"testing"

	"github.com/oprov/oprov/manifest"
)

func TestParseFilename(t *testing.T) {
	got, err := ParseFilename("terraform-provider-my-api_1.2.0-rc.1_linux_arm64.zip")
	want := Filename{Type: "my-api", Version: "1.2.0-rc.1", Platform: manifest.Platform{OS: "linux", Arch: "arm64"}}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got.String() != "terraform-provider-my-api_1.2.0-rc.1_linux_arm64.zip" {
		t.Errorf("String() = %s", got)
	}
	for _, bad := range []string{
		"hello.zip", "terraform-provider-x_1.0.0_linux.zip", "terraform-provider-x_1.0.0_linux_amd64.tar.gz",
		"terraform-provider-X_1.0.0_linux_amd64.zip", "terraform-provider-x_v1.0.0_linux_amd64.zip",
		"terraform-provider-x_1.0.0_linux_amd64_v8.zip", "terraform-provider-_1.0.0_linux_amd64.zip",
	} {
		if _, err := ParseFilename(bad); err == nil {
			t.Errorf("ParseFilename(%q) accepted it", bad)
		}
	}
}

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
