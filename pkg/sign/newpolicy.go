package sign

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// PolicyFrom says where a trust policy comes from: public keys trusted for every provider and
// repository (--key, an oci_mirror block's public_keys), or a policy file (--policy, oci_mirror's
// policy). Relative paths are relative to Base's directory.
type PolicyFrom struct {
	Keys []string // key files, or PEM keys themselves
	// Identities are keyless signers trusted beside the keys (--certificate-identity and its
	// kin); they need TrustedRoot.
	Identities []Identity
	// TrustedRoot is sigstore's trusted_root.json (--trusted-root): the root keyless signatures
	// are checked against, offline; for a policy file, the root of the rules that name none.
	TrustedRoot string
	File        string // a policy file
	// Base is the file that named the keys or the policy file ("": they were given on the command
	// line, relative to the working directory). It is the keys' policy's Path.
	Base string
	// Rule names the keys' rule in messages ("--key", "oci_mirror at oprov.hcl:3").
	Rule string
	// KeysName is what the keys are listed under, to label a PEM key given inline: KeysName[i].
	KeysName string
}

// ErrKeysAndPolicy is NewPolicy's answer to keys and a policy file at once: give one.
var ErrKeysAndPolicy = errors.New("give keys or identities, or a policy file, not both")

// ErrNoTrustedRoot is NewPolicy's answer to identities without a trusted root.
var ErrNoTrustedRoot = errors.New("a keyless identity needs a trusted root to check certificates against, offline: give --trusted-root FILE ('oprov trusted-root --to FILE' fetches Sigstore's, checked through TUF)")

// NewPolicy is the one way keys or a policy file become a Policy: a file is loaded and checked
// (loadPolicy); keys become a policy with one rule that enforces them for every provider and
// repository. Neither gives nil: no verification asked for.
func NewPolicy(f PolicyFrom) (*Policy, error) {
	for _, id := range f.Identities {
		if err := id.Check(); err != nil {
			return nil, err
		}
	}
	var tr *TrustedRoot
	if f.TrustedRoot != "" {
		file := f.TrustedRoot
		if f.Base != "" && !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(f.Base), file)
		}
		var err error
		if tr, err = LoadTrustedRoot(file); err != nil {
			return nil, err
		}
	}
	switch {
	case (len(f.Keys) > 0 || len(f.Identities) > 0) && f.File != "":
		return nil, ErrKeysAndPolicy
	case f.File != "":
		file := f.File
		if f.Base != "" && !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(f.Base), file)
		}
		return loadPolicy(file, tr)
	case len(f.Identities) > 0 && tr == nil:
		return nil, ErrNoTrustedRoot
	case len(f.Keys) > 0 || len(f.Identities) > 0:
		rule := &Rule{Name: f.Rule, Mode: ModeEnforce, Providers: []string{"*/*/*"}, Repositories: []string{"**"}, Identities: f.Identities, TrustedRoot: tr}
		for i, k := range f.Keys {
			var pk PublicKey
			var err error
			if f.Base == "" && !strings.HasPrefix(strings.TrimSpace(k), "-----BEGIN") {
				pk, err = LoadPublicKey(k) // as given, so that errors name it so
			} else {
				pk, err = loadPublicKeyFrom(f.Base, k, fmt.Sprintf("%s[%d]", f.KeysName, i))
			}
			if err != nil {
				return nil, err
			}
			rule.Keys = append(rule.Keys, pk)
		}
		path := f.Base
		if path == "" {
			path = f.Rule
		}
		return &Policy{Path: path, Mode: ModeEnforce, Rules: []*Rule{rule}}, nil
	}
	return nil, nil
}
