package loader

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/internal/testing/testfix"
)

// A far side whose cache is at its bound takes no zip from a near side, and says which bound.
func TestHostCacheBound(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	req, zp := hostRequest(t, r, r.H1(testfix.Host()))
	answer, asked, err := nearSide(t, HostOptions{Cache: testfix.Cache(t), CacheLimit: 100}, req, zp)
	msg, _ := answer["error"].(string)
	if asked || err == nil || !strings.Contains(msg, "over its bound of 100 bytes") {
		t.Fatalf("a zip past the cache bound: asked %v, answer %v, err %v", asked, answer, err)
	}
}
