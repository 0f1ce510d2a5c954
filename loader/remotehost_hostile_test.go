package loader

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// A far side run with --require-sandbox and no configuration of its own applies the default
// sandbox and nothing the request asks beyond it: a near side asking for the whole file system,
// every variable or more of a limit is refused, naming the far setting, before the zip is asked
// for. (Before, the far side applied the near side's lists as they came: read = ["/"] and
// env = ["AWS_*"] gave the near side's code the far account's files and credentials.)
func TestHostNearSideCannotWidenRequiredSandbox(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	for name, block := range map[string]string{
		"read":    `"read":["/"]`,
		"write":   `"write":["/"]`,
		"execute": `"execute":["/"]`,
		"env":     `"env":["AWS_*"]`,
		"env *":   `"env":["*"]`,
		"home":    `"read":["~/.ssh"]`,
		"connect": `"connect":[22]`,
	} {
		t.Run(name, func(t *testing.T) {
			req, zp := hostRequest(t, r, r.H1(testfix.Host()))
			req.Sandbox = []byte(`{"label":"*","file":"oprov.hcl","line":3,` + block + `}`)
			answer, asked, err := nearSide(t, HostOptions{Cache: testfix.Cache(t), RequireSandbox: true}, req, zp)
			msg, _ := answer["error"].(string)
			if asked || err == nil || !(strings.Contains(msg, "--require-sandbox") || strings.Contains(msg, "not a variable name")) {
				t.Fatalf("a near side asking %s under --require-sandbox: asked for the zip %v, answer %v, err %v", block, asked, answer, err)
			}
		})
	}
}

// A zip the far side refuses (its h1: is not one the near side's lock records) leaves nothing in
// the far side's cache: not the zip, not a file of it. (Before, the zip was kept, and a near side
// could fill the far disk with refused zips.)
func TestHostRefusedZipLeavesNothing(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	other := r.Republished(t)
	c := testfix.Cache(t)
	req, zp := hostRequest(t, r, other.H1(testfix.Host()))
	answer, asked, err := nearSide(t, HostOptions{Cache: c}, req, zp)
	if !asked || err == nil || answer["error"] == nil {
		t.Fatalf("asked %v, answer %v, err %v", asked, answer, err)
	}
	if c.HasZip(digest.Digest(req.Zip)) {
		t.Errorf("the refused zip %s is in the far side's cache", req.Zip)
	}
	filepath.WalkDir(c.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.Contains(p, string(filepath.Separator)+"locks"+string(filepath.Separator)) {
			if st, _ := d.Info(); st != nil && st.Size() > 0 {
				t.Errorf("the far side's cache keeps %s after a refused zip", p)
			}
		}
		return nil
	})
}

// A near side may not reach past the far block's path through a link below it: the sandbox
// follows a link when it grants a path, so write = ["WORK/esc"], where esc (made by an earlier
// provider that could write WORK) leads to the far account's ~/.ssh, would grant ~/.ssh. The
// path is judged where it leads, and granted there. (Before, it was judged as written: within
// WORK, and granted.)
func TestHostNearSideCannotEscapeThroughALink(t *testing.T) {
	dir := t.TempDir()
	work, secret := filepath.Join(dir, "work"), filepath.Join(dir, "ssh")
	for _, d := range []string{filepath.Join(work, "sub"), secret} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(work, "esc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "sub"), filepath.Join(work, "inside")); err != nil {
		t.Fatal(err)
	}
	far := &config.Sandbox{Label: "*", Read: []string{work}, Write: []string{work}, Range: hcl.Range{Filename: "host.hcl", Start: hcl.Pos{Line: 4}}}
	if err := os.Symlink(filepath.Join(secret, "absent"), filepath.Join(work, "dangling")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(work, "esc"), filepath.Join(work, "esc", "authorized_keys"), filepath.Join(work, "dangling")} {
		near := &config.Sandbox{Label: "*", Write: []string{p}, Range: hcl.Range{Filename: "oprov.hcl", Start: hcl.Pos{Line: 2}}}
		if got, err := narrowSandbox(far, near); err == nil || !strings.Contains(err.Error(), "host.hcl:4") {
			t.Errorf("write = [%q] (a link out of %s): got %v, %v; want it refused naming host.hcl:4", p, work, got, err)
		}
	}
	// A link that stays inside is granted where it leads.
	near := &config.Sandbox{Label: "*", Write: []string{filepath.Join(work, "inside")}, Range: hcl.Range{Filename: "oprov.hcl", Start: hcl.Pos{Line: 2}}}
	got, err := narrowSandbox(far, near)
	if err != nil || len(got.Write) != 1 || got.Write[0] != filepath.Join(work, "sub") {
		t.Errorf("write = [work/inside] (a link to work/sub): got %v, %v; want work/sub", got, err)
	}
	// What was judged where it led is opened by the sandbox without following links, so a link
	// swapped in after this check is refused (pkg/sandbox's TestApplyNoLinksRefusesASwappedLink).
	if got != nil {
		os.WriteFile(filepath.Join(work, "sub", "p"), []byte("#!/bin/sh\n"), 0o755)
		spec, err := sandboxSpec(Launchable{Addr: "example.com/acme/x", Executable: filepath.Join(work, "sub", "p")}, got)
		if err != nil || !slices.Contains(spec.NoLinks, filepath.Join(work, "sub")) || !slices.Contains(spec.Write, filepath.Join(work, "sub")) {
			t.Errorf("the narrowed path is not marked to be opened without links: %v, %+v", err, spec)
		}
	}
}
