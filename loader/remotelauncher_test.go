package loader

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/tofufiles"
)

// After oprov init, each provider a remote block selects is installed as a launcher that hands
// over to `oprov __remote-provider ADDR`; the lock gains the launcher's h1: beside the package's
// own (written at once), so tofu accepts it. A provider no block selects is left as it was, and a
// second init changes nothing.
func TestRemoteLaunchersReplaceSelectedPackages(t *testing.T) {
	dir := t.TempDir()
	hello, other := mustAddr(t, "example.com/acme/hello"), mustAddr(t, "example.com/acme/other")
	lock, err := config.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	pkgHash := "h1:" + strings.Repeat("A", 43) + "="
	for _, a := range []string{hello.String(), other.String()} {
		lock.Set(&tofufiles.LockEntry{Addr: a, Version: "1.0.0", Hashes: []string{pkgHash}})
	}
	pat, err := artifact.ParsePattern(hello.String())
	if err != nil {
		t.Fatal(err)
	}
	p := &Project{Dir: dir, Lock: lock, Config: &config.Config{Path: "oprov.hcl", Remotes: []*config.Remote{{
		Label: hello.String(), Pattern: pat, Command: []string{"ssh", "far"},
		Range: hcl.Range{Filename: "oprov.hcl", Start: hcl.Pos{Line: 3}}}}}}
	installed := []Installed{
		{Addr: hello.String(), Version: "1.0.0", Platform: "linux_amd64", Executable: "/cache/hello"},
		{Addr: other.String(), Version: "1.0.0", Platform: "linux_amd64", Executable: "/cache/other"},
	}
	out, err := p.withRemoteLaunchers(installed)
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Executable != installed[1].Executable || out[1].Dir != installed[1].Dir {
		t.Errorf("a provider no remote block selects was changed: %+v", out[1])
	}
	exe := out[0].Executable
	if !strings.HasPrefix(exe, filepath.Join(dir, remoteMirror)) || filepath.Base(exe) != "terraform-provider-hello" {
		t.Fatalf("the launcher is at %s", exe)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `exec "$oprov" `+RemoteProviderCommand+` 'example.com/acme/hello'`) {
		t.Errorf("the launcher does not hand over to oprov:\n%s", data)
	}
	if st, _ := os.Stat(exe); st.Mode().Perm() != 0o755 {
		t.Errorf("the launcher's mode is %v", st.Mode().Perm())
	}
	hashes := p.Lock.Entries[hello.String()].Hashes
	if len(hashes) != 2 || !slices.Contains(hashes, pkgHash) {
		t.Fatalf("the lock's hashes for hello: %v, want the package's and the launcher's", hashes)
	}
	onDisk, err := os.ReadFile(filepath.Join(dir, config.LockFileName))
	if err != nil || !strings.Contains(string(onDisk), hashes[1]) {
		t.Fatalf("the lock on disk lacks the launcher's hash: %v\n%s", err, onDisk)
	}
	if got := p.Lock.Entries[other.String()].Hashes; len(got) != 1 {
		t.Errorf("the other provider's hashes changed: %v", got)
	}

	again, err := p.withRemoteLaunchers(installed)
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Executable != exe || len(p.Lock.Entries[hello.String()].Hashes) != 2 {
		t.Errorf("a second init changed the launcher or the lock: %s %v", again[0].Executable, p.Lock.Entries[hello.String()].Hashes)
	}
}
