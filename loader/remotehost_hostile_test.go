package loader

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

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
