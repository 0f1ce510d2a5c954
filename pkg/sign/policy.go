package sign

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"

	"github.com/oprov/oprov/internal/hcldiag"

	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
)

// Modes of a trust rule.
const (
	ModeEnforce = "enforce" // a version without a good signature is refused
	ModeWarn    = "warn"    // it is reported, and used anyway
)

// Policy maps provider addresses and repositories to the keys and keyless identities allowed to
// sign them:
//
//	mode         = "enforce"           # default for every rule: enforce or warn
//	trusted_root = "trusted_root.json" # default for every rule: sigstore's trusted root, for identities
//
//	trust "acme" {
//	  providers    = ["example.com/acme/*"]                    # provider source addresses
//	  repositories = ["registry.example.com/providers/acme/*"] # OCI repositories
//	  keys         = ["keys/acme.pub", "keys/acme-2027.pub"]   # several keys, for rotation
//	  mode         = "warn"                                    # optional, overrides the default
//	  origin_keys  = ["C874011F0AB405110D02105534365D9472D7468F"] # OpenPGP key fingerprints
//
//	  identity {                                               # a keyless signer (repeatable)
//	    issuer         = "https://token.actions.githubusercontent.com" # or issuer_regexp
//	    subject_regexp = "^https://github.com/acme/providers/\\.github/workflows/release\\.yml@refs/tags/v.*$" # or subject
//	    repository     = "acme/providers" # optional GitHub workflow claims, exact
//	    ref            = "refs/tags/v1.0.0"
//	    trigger        = "push"
//	  }
//	}
//
// Patterns use '*' for one path element and a trailing "/**" for any depth. Key and trusted root
// paths are relative to the policy file; a key starting with "-----BEGIN" is the PEM key itself.
// origin_keys trusts an origin registry's OpenPGP signature over a release's SHA256SUMS, as
// mirror and 'save --config' attach it to a version (the referrer pkg/origin writes): the key that
// signed must be one whose full fingerprint (40 hex digits, spaces allowed) the rule names, and
// SHA256SUMS must list every zip of the version. The key the origin served travels with the
// evidence; only the fingerprint in the policy makes it trusted.
// A rule needs keys, identities or origin keys (any may sign); identities need a trusted root. The
// first rule that matches decides; a provider no rule matches is refused in enforce mode.
type Policy struct {
	Path  string
	Mode  string
	Rules []*Rule
}

// Rule is one trust block.
type Rule struct {
	Name         string
	Providers    []string
	Repositories []string
	Keys         []PublicKey
	Identities   []Identity
	TrustedRoot  *TrustedRoot
	Mode         string
	// OriginKeys are the OpenPGP primary key fingerprints (40 hex digits, upper case) trusted
	// to sign an origin's SHA256SUMS for the providers the rule matches.
	OriginKeys []string
}

type policyFile struct {
	Mode        *hcl.Attribute `hcl:"mode,optional"`
	TrustedRoot *string        `hcl:"trusted_root,optional"`
	Trust       []trustFile    `hcl:"trust,block"`
}

type trustFile struct {
	Name         string          `hcl:"name,label"`
	Providers    []string        `hcl:"providers,optional"`
	Repositories []string        `hcl:"repositories,optional"`
	Keys         []string        `hcl:"keys,optional"`
	Identities   []IdentityBlock `hcl:"identity,block"`
	TrustedRoot  *string         `hcl:"trusted_root,optional"`
	Mode         *hcl.Attribute  `hcl:"mode,optional"`
	OriginKeys   []string        `hcl:"origin_keys,optional"`
	DeclRange    hcl.Range       `hcl:",def_range"`
}

// IdentityBlock is an identity block as HCL files write it (a policy's trust block, oprov.hcl's
// oci_mirror block).
type IdentityBlock struct {
	Issuer        string    `hcl:"issuer,optional"`
	IssuerRegexp  string    `hcl:"issuer_regexp,optional"`
	Subject       string    `hcl:"subject,optional"`
	SubjectRegexp string    `hcl:"subject_regexp,optional"`
	Repository    string    `hcl:"repository,optional"`
	Ref           string    `hcl:"ref,optional"`
	Trigger       string    `hcl:"trigger,optional"`
	DeclRange     hcl.Range `hcl:",def_range"`
}

// loadPolicy reads and checks a policy file (errors point at file:line); defaultRoot as parsePolicy.
func loadPolicy(file string, defaultRoot *TrustedRoot) (*Policy, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("trust policy: %w", err)
	}
	return parsePolicy(file, src, defaultRoot)
}

// parsePolicy parses a policy; defaultRoot (--trusted-root) serves rules and policies that name
// no trusted root of their own.
func parsePolicy(file string, src []byte, defaultRoot *TrustedRoot) (*Policy, error) {
	var pf policyFile
	if err := hcldiag.Decode(file, src, &pf); err != nil {
		return nil, err
	}
	p := &Policy{Path: file}
	var err error
	if p.Mode, err = readMode(pf.Mode, ModeEnforce, ""); err != nil {
		return nil, err
	}
	roots := map[string]*TrustedRoot{}
	loadRoot := func(name string) (*TrustedRoot, error) {
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(file), name)
		}
		if roots[name] == nil {
			tr, err := LoadTrustedRoot(name)
			if err != nil {
				return nil, err
			}
			roots[name] = tr
		}
		return roots[name], nil
	}
	if pf.TrustedRoot != nil {
		if defaultRoot, err = loadRoot(*pf.TrustedRoot); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	seen := map[string]bool{}
	for _, tf := range pf.Trust {
		at := fmt.Sprintf("%s:%d", tf.DeclRange.Filename, tf.DeclRange.Start.Line)
		if seen[tf.Name] {
			return nil, fmt.Errorf("%s: trust %q is declared twice", at, tf.Name)
		}
		seen[tf.Name] = true
		r, err := parseRule(file, at, tf, p.Mode, defaultRoot, loadRoot)
		if err != nil {
			return nil, err
		}
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

// parseRule reads one trust block (at names it in messages): its patterns, mode, keys,
// identities with their trusted root (the block's own, or dflt), and origin keys.
func parseRule(file, at string, tf trustFile, mode string, dflt *TrustedRoot, loadRoot func(string) (*TrustedRoot, error)) (*Rule, error) {
	r := &Rule{Name: tf.Name, Providers: tf.Providers, Repositories: tf.Repositories}
	var err error
	if r.Mode, err = readMode(tf.Mode, mode, fmt.Sprintf("trust %q: ", tf.Name)); err != nil {
		return nil, err
	}
	if len(r.Providers)+len(r.Repositories) == 0 {
		return nil, fmt.Errorf("%s: trust %q matches nothing: give providers or repositories", at, tf.Name)
	}
	for _, pat := range append(append([]string{}, r.Providers...), r.Repositories...) {
		if _, err := path.Match(strings.TrimSuffix(pat, "/**"), ""); err != nil {
			return nil, fmt.Errorf("%s: trust %q: bad pattern %q", at, tf.Name, pat)
		}
	}
	if len(tf.Keys) == 0 && len(tf.Identities) == 0 && len(tf.OriginKeys) == 0 {
		return nil, fmt.Errorf("%s: trust %q lists no keys and no identity (and no origin_keys)", at, tf.Name)
	}
	if r.OriginKeys, err = originFingerprints(tf.OriginKeys); err != nil {
		return nil, fmt.Errorf("%s: trust %q: %w", at, tf.Name, err)
	}
	for _, idf := range tf.Identities {
		id, err := idf.Identity()
		if err != nil {
			return nil, fmt.Errorf("%s: trust %q: %w", hcldiag.At(idf.DeclRange), tf.Name, err)
		}
		r.Identities = append(r.Identities, id)
	}
	r.TrustedRoot = dflt
	if tf.TrustedRoot != nil {
		if r.TrustedRoot, err = loadRoot(*tf.TrustedRoot); err != nil {
			return nil, fmt.Errorf("%s: trust %q: %w", at, tf.Name, err)
		}
	}
	if len(r.Identities) > 0 && r.TrustedRoot == nil {
		return nil, fmt.Errorf("%s: trust %q trusts identities but names no trusted root: set trusted_root in the rule or at the top of the policy (%s)", at, tf.Name, trustedRootFix)
	}
	for i, k := range tf.Keys {
		pk, err := loadPublicKeyFrom(file, k, fmt.Sprintf("%s key %d", tf.Name, i+1))
		if err != nil {
			return nil, fmt.Errorf("%s: trust %q: %w", at, tf.Name, err)
		}
		r.Keys = append(r.Keys, pk)
	}
	return r, nil
}

// originFingerprints checks and normalizes origin_keys: full OpenPGP v4 fingerprints only (a
// 16-digit key ID is too short to name a key safely).
func originFingerprints(in []string) ([]string, error) {
	var out []string
	for _, f := range in {
		n := strings.ToUpper(strings.ReplaceAll(f, " ", ""))
		if len(n) != 40 || strings.Trim(n, "0123456789ABCDEF") != "" {
			return nil, fmt.Errorf("origin_keys: %q is not an OpenPGP fingerprint: give the signing key's full fingerprint, 40 hex digits ('gpg --fingerprint' prints it; a failed 'oprov load --policy' names the key the evidence carries)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Identity is the block's identity, checked.
func (b IdentityBlock) Identity() (Identity, error) {
	id := Identity{Issuer: b.Issuer, IssuerRegexp: b.IssuerRegexp, Subject: b.Subject, SubjectRegexp: b.SubjectRegexp,
		Repository: b.Repository, Ref: b.Ref, Trigger: b.Trigger}
	return id, id.Check()
}

// TrustsSigner tells whether one of the rule's identities matches a keyless signer recorded
// earlier (as in the cache's metadata).
func (r *Rule) TrustsSigner(s CertSigner) bool {
	summary := certificate.Summary{SubjectAlternativeName: s.Subject}
	summary.Issuer, summary.GithubWorkflowRepository, summary.GithubWorkflowRef, summary.GithubWorkflowTrigger = s.Issuer, s.Repository, s.Ref, s.Trigger
	for _, id := range r.Identities {
		if m, err := id.matcher(); err == nil && m.Verify(summary) == nil {
			return true
		}
	}
	return false
}

// readMode reads a mode attribute, or gives dflt when there is none. Errors point at its line,
// then say what (such as `trust "acme": `).
func readMode(a *hcl.Attribute, dflt, what string) (string, error) {
	if a == nil {
		return dflt, nil
	}
	m, err := hcldiag.String(a)
	if err != nil {
		return "", err
	}
	if m != ModeEnforce && m != ModeWarn {
		return "", fmt.Errorf("%s: %smode %q: want %q (refuse what no trusted key signed) or %q (report it and go on)", hcldiag.At(a.Range), what, m, ModeEnforce, ModeWarn)
	}
	return m, nil
}

// Match finds the rule for a repository (HOST/PATH) and, when known, a provider address
// (HOST/NAMESPACE/TYPE). Provider patterns are tried before repository patterns within each rule.
func (p *Policy) Match(repository, provider string) *Rule {
	for _, r := range p.Rules {
		if provider != "" && matchAny(r.Providers, provider) {
			return r
		}
		if repository != "" && matchAny(r.Repositories, repository) {
			return r
		}
	}
	return nil
}

func matchAny(patterns []string, s string) bool {
	for _, pat := range patterns {
		if matchPattern(pat, s) {
			return true
		}
	}
	return false
}

// matchPattern matches s against pat: '*' is one path element, a trailing "/**" any depth, and
// "**" alone anything.
func matchPattern(pat, s string) bool {
	if pat == "**" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pat, "/**"); ok {
		parts := strings.Split(s, "/")
		np := len(strings.Split(prefix, "/"))
		if len(parts) <= np {
			return false
		}
		ok, _ := path.Match(prefix, strings.Join(parts[:np], "/"))
		return ok
	}
	ok, _ := path.Match(pat, s)
	return ok
}

// Decision is the outcome of verifying under a policy.
type Decision struct {
	Rule    string  // the rule that applied ("" when none did)
	Mode    string  // enforce or warn
	Result  *Result // set when verification succeeded
	Warning error   // set when verification failed, or no rule applied, and the mode is warn
}

// Decide verifies the version ref names under the policy when there is one (see VerifyWithPolicy),
// and otherwise with opts.Keys in enforce mode, so that callers which take either trusted keys or
// a policy get a Decision both ways.
func Decide(ctx context.Context, t oci.ReadOnly, ref oci.Ref, p *Policy, provider string, opts VerifyOptions) (*Decision, error) {
	if p == nil && len(opts.Keys) == 0 && len(opts.Identities) == 0 {
		return nil, &Error{Ref: ref, Reason: noTrust}
	}
	v, err := artifact.ResolveVersion(ctx, t, ref, opts.Limits)
	if err != nil {
		return nil, err
	}
	return decide(ctx, t, ref, v, p, provider, opts)
}

// decide verifies a version already resolved (nothing is resolved by tag again; see
// verifyVersion) with the keys and identities the policy's rule for it trusts when there is a
// policy, and otherwise with opts.Keys and opts.Identities in enforce mode. provider is the
// provider's address when known. In warn mode a failed verification is the decision's Warning;
// in enforce mode it is the error.
func decide(ctx context.Context, t oci.ReadOnly, ref oci.Ref, v *artifact.Version, p *Policy, provider string, opts VerifyOptions) (*Decision, error) {
	d := &Decision{Mode: ModeEnforce}
	if p != nil {
		r, err := p.ruleFor(ref, v, provider)
		if err != nil {
			if p.Mode == ModeWarn {
				return &Decision{Mode: ModeWarn, Warning: err}, nil
			}
			return nil, err
		}
		opts.Keys, opts.Identities, opts.TrustedRoot = r.Keys, r.Identities, r.TrustedRoot
		d.Rule, d.Mode = r.Name, r.Mode
	}
	res, err := verifyVersion(ctx, t, ref, v, opts)
	var ve *Error
	if err != nil && d.Mode == ModeWarn && errors.As(err, &ve) {
		d.Warning = err
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	d.Result = res
	return d, nil
}

// VerifyWithPolicy resolves ref once and checks what it resolved to (Check).
func (p *Policy) VerifyWithPolicy(ctx context.Context, t oci.ReadOnly, ref oci.Ref, provider string, opts VerifyOptions) (*Decision, error) {
	v, err := artifact.ResolveVersion(ctx, t, ref, opts.Limits)
	if err != nil {
		return nil, err
	}
	return p.Check(ctx, t, ref, v, provider, opts)
}

// Check verifies an already resolved version with the keys the policy trusts for it (see
// verifyVersion: nothing is resolved by tag again). provider is the provider's address when
// known. In warn mode a failure is returned as the decision's Warning; in enforce mode it is the
// error.
func (p *Policy) Check(ctx context.Context, t oci.ReadOnly, ref oci.Ref, v *artifact.Version, provider string, opts VerifyOptions) (*Decision, error) {
	return decide(ctx, t, ref, v, p, provider, opts)
}

// ruleFor gives the policy's rule for ref's repository or provider, or the refusal that names
// the policy when none covers them.
func (p *Policy) ruleFor(ref oci.Ref, v *artifact.Version, provider string) (*Rule, error) {
	repo := ref.Repo()
	if r := p.Match(repo, provider); r != nil {
		return r, nil
	}
	subject := repo
	if provider != "" {
		subject = provider + " (" + repo + ")"
	}
	return nil, &Error{Ref: ref, Digest: v.Index.Digest, Reason: fmt.Sprintf("no trust rule in %s covers %s (add a trust block whose providers or repositories match it)", p.Path, subject)}
}
