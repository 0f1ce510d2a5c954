package loader

import "testing"

// TestStandaloneAddresses: a provider outside any registry is reported as local/TYPE, TYPE from
// its executable's or directory's name.
func TestStandaloneAddresses(t *testing.T) {
	for path, want := range map[string]string{
		"/bin/terraform-provider-hello_v1.2.0":     "registry.opentofu.org/local/hello",
		"terraform-provider-hello.exe":             "registry.opentofu.org/local/hello",
		"./dist/terraform-provider-hello_1.0.0_x5": "registry.opentofu.org/local/hello",
		"/usr/bin/something":                       "registry.opentofu.org/local/unknown",
	} {
		if got := ExecutableAddress(path).String(); got != want {
			t.Errorf("ExecutableAddress(%s) = %s, want %s", path, got, want)
		}
	}
	for dir, want := range map[string]string{
		"/src/terraform-provider-acme": "registry.opentofu.org/local/acme",
		"/src/widgets":                 "registry.opentofu.org/local/widgets",
	} {
		if got := DirAddress(dir).String(); got != want {
			t.Errorf("DirAddress(%s) = %s, want %s", dir, got, want)
		}
	}
}
