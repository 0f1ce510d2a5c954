package source

import (
	"sync"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
)

// Verified remembers successful signature checks by the index digest they covered, so that a
// long-running process (the serving mirror) which opens a fresh OCI source every so often, to
// notice moved tags, does not check the same signature again. It holds only successes: a
// version refused now may be signed later, without its index digest changing.
//
// An entry is keyed by provider, repository, tag and index digest, because the check depends on
// all four (the trust rule that applies, and whether the index is the version its tag says).
// It is safe for concurrent use and holds at most max entries (it starts over when full).
type Verified struct {
	mu  sync.Mutex
	max int
	m   map[string]cache.Authentication
}

// NewVerified makes an empty cache of at most max entries.
func NewVerified(max int) *Verified {
	return &Verified{max: max, m: map[string]cache.Authentication{}}
}

func verifiedKey(addr manifest.ProviderAddress, ref oci.Ref, d digest.Digest) string {
	return addr.String() + " " + ref.String() + "@" + d.String()
}

// lookup gives the remembered authentication of a version; a nil cache knows nothing.
func (c *Verified) lookup(addr manifest.ProviderAddress, ref oci.Ref, d digest.Digest) (cache.Authentication, bool) {
	if c == nil {
		return cache.Authentication{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[verifiedKey(addr, ref, d)]
	return a, ok
}

// remember keeps a verification that succeeded outright (a signature by a trusted key, no
// warn-mode pass).
func (c *Verified) remember(addr manifest.ProviderAddress, ref oci.Ref, a cache.Authentication) {
	if c == nil || a.Method != "cosign" || a.Warning != "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		c.m = map[string]cache.Authentication{}
	}
	c.m[verifiedKey(addr, ref, a.Subject)] = a
}

// Len is the number of verifications remembered.
func (c *Verified) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// WithVerified makes the source consult and fill c before and after each signature check.
func (s *OCI) WithVerified(c *Verified) *OCI {
	s.verified = c
	return s
}
