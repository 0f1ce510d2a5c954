package config

import (
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"

	"github.com/oprov/oprov/internal/hcldiag"
	"github.com/oprov/oprov/manifest"
)

// HostConfig is a far side's own configuration (`oprov provider host --stdio --config FILE`),
// written by the far host's operator in oprov.hcl's syntax: the rights a remote provider gets
// there come from it, never from the near side's request.
//
//   - oci_mirror blocks say which providers may run there (their include and exclude), where
//     the far side finds their releases, and whose signatures it requires (policy,
//     public_keys, identity): the far side checks the release itself before it runs anything.
//   - sandbox blocks are the sandbox each provider runs under there. A near side's block may
//     narrow it, never widen it.
//   - a host block bounds what remote requests may cost the far side, and its allow_source names
//     the providers a near side may run here built from its own source: unsigned, so refused
//     unless named there.
type HostConfig struct {
	Path      string
	Mirrors   []*Mirror
	Sandboxes []*Sandbox
	// CacheLimit bounds, in bytes, the zips remote requests may keep in the far side's cache (0:
	// the default, DefaultHostCacheLimit).
	CacheLimit uint64
	// Streams bounds the streams one connection may have open at once (0: the default).
	Streams int
	// AllowSource are the addresses a near side may run here as a provider it built from source
	// kept beside its configuration: code no one signed, run under this side's sandbox for it.
	AllowSource []Pattern
	// AllowSourceAt is the allow_source attribute's FILE:LINE, for messages ("" when none).
	AllowSourceAt string
}

// DefaultHostCacheLimit is the far cache's bound on zips received from near sides when the host
// block sets none.
const DefaultHostCacheLimit = 2 << 30

type hostConfigFile struct {
	Mirrors   []mirrorFile  `hcl:"oci_mirror,block"`
	Sandboxes []sandboxFile `hcl:"sandbox,block"`
	Host      *hostFile     `hcl:"host,block"`
}

type hostFile struct {
	CacheLimit  *string   `hcl:"cache_limit,optional"`
	Streams     *int      `hcl:"streams,optional"`
	AllowSource []string  `hcl:"allow_source,optional"`
	DeclRange   hcl.Range `hcl:",def_range"`
}

// LoadHostConfig reads a far side's configuration. Blocks that mean nothing there (remote,
// provider, audit, rule, module_mirror) are errors at their line.
func LoadHostConfig(path string) (*HostConfig, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("the far side's configuration: %w", err)
	}
	var hf hostConfigFile
	if err := hcldiag.Decode(path, src, &hf); err != nil {
		return nil, fmt.Errorf("%w (a far side's configuration takes oci_mirror, sandbox and host blocks)", err)
	}
	hc := &HostConfig{Path: path}
	for _, mf := range hf.Mirrors {
		m, err := parseMirror(path, src, mf)
		if err != nil {
			return nil, err
		}
		hc.Mirrors = append(hc.Mirrors, m)
	}
	c := &Config{Path: path}
	if err := c.parseSandboxes(hf.Sandboxes); err != nil {
		return nil, err
	}
	hc.Sandboxes = c.Sandboxes
	if h := hf.Host; h != nil {
		at := hcldiag.At(h.DeclRange)
		if h.CacheLimit != nil {
			if hc.CacheLimit, err = parseBytes(*h.CacheLimit); err != nil {
				return nil, fmt.Errorf("%s: host: cache_limit: %w", at, err)
			}
		}
		if h.Streams != nil {
			if *h.Streams < 1 || *h.Streams > 1<<16 {
				return nil, fmt.Errorf("%s: host: streams = %d: want 1 to 65536", at, *h.Streams)
			}
			hc.Streams = *h.Streams
		}
		if h.AllowSource != nil {
			if len(h.AllowSource) == 0 {
				return nil, fmt.Errorf("%s: host: allow_source = []: name the provider addresses (or patterns such as example.com/acme/*) a near side may run here built from its source, or leave the attribute out", at)
			}
			if hc.AllowSource, err = parsePatterns(h.AllowSource); err != nil {
				return nil, fmt.Errorf("%s: host: allow_source: %w", at, err)
			}
			hc.AllowSourceAt = at
		}
	}
	if len(hc.Mirrors) == 0 && len(hc.AllowSource) == 0 {
		return nil, fmt.Errorf("%s: no oci_mirror block, so no provider may run here: add one whose include names the providers this host runs, with the keys that must have signed them", path)
	}
	return hc, nil
}

// MirrorFor gives the first oci_mirror block that includes addr, or nil: the provider may not
// run on this host.
func (hc *HostConfig) MirrorFor(addr manifest.ProviderAddress) *Mirror {
	for _, m := range hc.Mirrors {
		if m.Matches(addr) {
			return m
		}
	}
	return nil
}

// SourceAllowed says whether a near side may run addr here built from its own source: whether
// a host block's allow_source names it.
func (hc *HostConfig) SourceAllowed(addr manifest.ProviderAddress) bool {
	for _, p := range hc.AllowSource {
		if p.Match(addr) {
			return true
		}
	}
	return false
}

// SandboxFor gives the far operator's sandbox block for addr, or nil.
func (hc *HostConfig) SandboxFor(addr manifest.ProviderAddress) *Sandbox {
	return (&Config{Sandboxes: hc.Sandboxes}).SandboxFor(addr)
}

// AsConfig is the configuration as a project's: its oci_mirror blocks, for resolving releases.
func (hc *HostConfig) AsConfig() *Config {
	return &Config{Path: hc.Path, Mirrors: hc.Mirrors, Sandboxes: hc.Sandboxes}
}
