package loader

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testfix"
)

// A far side that requires a sandbox does not let the near side weaken it: a block asking for
// best effort (run with less of a sandbox where this kernel lacks a part) is refused before the
// zip is asked for, since the near side, not the far side's operator, wrote it.
func TestHostRequiredSandboxIsNotBestEffort(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	req, zp := hostRequest(t, r, r.H1(testfix.Host()))
	req.Sandbox = []byte(`{"label":"*","file":"oprov.hcl","line":1,"best_effort":true}`)
	answer, asked, err := nearSide(t, HostOptions{Cache: testfix.Cache(t), RequireSandbox: true}, req, zp)
	msg, _ := answer["error"].(string)
	if asked || err == nil || !strings.Contains(msg, "best_effort") {
		t.Fatalf("a required sandbox asked to be best effort: asked %v, answer %v, err %v", asked, answer, err)
	}
}

// A near side declaring a zip larger than any package may be is refused before the zip is asked
// for: the far side's disk is not the near side's to fill (the cache's package-size limit).
func TestHostRefusesHugeDeclaredZip(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	req, zp := hostRequest(t, r, r.H1(testfix.Host()))
	req.Size = 1 << 50
	answer, asked, err := nearSide(t, HostOptions{Cache: testfix.Cache(t)}, req, zp)
	msg, _ := answer["error"].(string)
	if asked || err == nil || !strings.Contains(msg, "over the maximum package size") {
		t.Fatalf("a 1 PiB zip: asked %v, answer %v, err %v", asked, answer, err)
	}
}
