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
	File string   // a policy file
	// Base is the file that named the keys or the policy file ("": they were given on the command
	// line, relative to the working directory). It is the keys' policy's Path.
	Base string
	// Rule names the keys' rule in messages ("--key", "oci_mirror at oprov.hcl:3").
	Rule string
	// KeysName is what the keys are listed under, to label a PEM key given inline: KeysName[i].
	KeysName string
}

// ErrKeysAndPolicy is NewPolicy's answer to keys and a policy file at once: give one.
var ErrKeysAndPolicy = errors.New("give keys or a policy file, not both")

// NewPolicy is the one way keys or a policy file become a Policy: a file is loaded and checked
// (LoadPolicy); keys become a policy with one rule that enforces them for every provider and
// repository. Neither gives nil: no verification asked for.
func NewPolicy(f PolicyFrom) (*Policy, error) {
	switch {
	case len(f.Keys) > 0 && f.File != "":
		return nil, ErrKeysAndPolicy
	case f.File != "":
		file := f.File
		if f.Base != "" && !filepath.IsAbs(file) {
			file = filepath.Join(filepath.Dir(f.Base), file)
		}
		return LoadPolicy(file)
	case len(f.Keys) > 0:
		rule := &Rule{Name: f.Rule, Mode: ModeEnforce, Providers: []string{"*/*/*"}, Repositories: []string{"**"}}
		for i, k := range f.Keys {
			var pk PublicKey
			var err error
			if f.Base == "" && !strings.HasPrefix(strings.TrimSpace(k), "-----BEGIN") {
				pk, err = LoadPublicKey(k) // as given, so that errors name it so
			} else {
				pk, err = LoadPublicKeyFrom(f.Base, k, fmt.Sprintf("%s[%d]", f.KeysName, i))
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
