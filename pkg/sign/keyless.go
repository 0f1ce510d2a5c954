package sign

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Identity is a keyless signer a trust rule accepts: the OIDC issuer and the subject (the
// certificate's subject alternative name) of the short-lived certificate Fulcio issued it, each
// exact or a regular expression, as cosign's --certificate-oidc-issuer(-regexp) and
// --certificate-identity(-regexp); and optionally the GitHub workflow claims Fulcio records
// (cosign's --certificate-github-workflow-repository, -ref and -trigger), each exact.
type Identity struct {
	Issuer        string `json:"issuer,omitempty"`
	IssuerRegexp  string `json:"issuer_regexp,omitempty"`
	Subject       string `json:"subject,omitempty"`
	SubjectRegexp string `json:"subject_regexp,omitempty"`
	Repository    string `json:"github_workflow_repository,omitempty"`
	Ref           string `json:"github_workflow_ref,omitempty"`
	Trigger       string `json:"github_workflow_trigger,omitempty"`
}

// IsZero tells whether no field is set.
func (id Identity) IsZero() bool { return id == Identity{} }

// String is the identity as messages show it.
func (id Identity) String() string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	add("subject", id.Subject)
	add("subject matching", id.SubjectRegexp)
	add("issuer", id.Issuer)
	add("issuer matching", id.IssuerRegexp)
	add("repository", id.Repository)
	add("ref", id.Ref)
	add("trigger", id.Trigger)
	return strings.Join(parts, ", ")
}

// Check says what is wrong with an identity rule: an issuer and a subject are each required,
// exact or a regular expression (not both), and regular expressions must compile.
func (id Identity) Check() error {
	if (id.Issuer == "") == (id.IssuerRegexp == "") {
		return errors.New("an identity needs an OIDC issuer: exactly one of issuer or issuer_regexp (--certificate-oidc-issuer or --certificate-oidc-issuer-regexp)")
	}
	if (id.Subject == "") == (id.SubjectRegexp == "") {
		return errors.New("an identity needs a subject: exactly one of subject or subject_regexp (--certificate-identity or --certificate-identity-regexp)")
	}
	_, err := id.matcher()
	return err
}

func (id Identity) matcher() (verify.CertificateIdentity, error) {
	for _, re := range []string{id.IssuerRegexp, id.SubjectRegexp} {
		if re != "" {
			if _, err := regexp.Compile(re); err != nil {
				return verify.CertificateIdentity{}, fmt.Errorf("identity: bad regular expression %q: %v", re, err)
			}
		}
	}
	san, err := verify.NewSANMatcher(id.Subject, id.SubjectRegexp)
	if err != nil {
		return verify.CertificateIdentity{}, fmt.Errorf("identity subject: %w", err)
	}
	iss, err := verify.NewIssuerMatcher(id.Issuer, id.IssuerRegexp)
	if err != nil {
		return verify.CertificateIdentity{}, fmt.Errorf("identity issuer: %w", err)
	}
	return verify.NewCertificateIdentity(san, iss, certificate.Extensions{
		GithubWorkflowRepository: id.Repository,
		GithubWorkflowRef:        id.Ref,
		GithubWorkflowTrigger:    id.Trigger,
	})
}

// CertSigner is who a certificate says signed: what Fulcio recorded from the OIDC token.
type CertSigner struct {
	Subject    string `json:"subject"`
	Issuer     string `json:"issuer"`
	Repository string `json:"github_workflow_repository,omitempty"`
	Ref        string `json:"github_workflow_ref,omitempty"`
	Trigger    string `json:"github_workflow_trigger,omitempty"`
}

// String is the signer as messages show it, each field quoted when it holds a character that is
// not printable: the certificate's claims come from whoever obtained it, and reach the terminal.
func (s CertSigner) String() string {
	out := printable(s.Subject) + " (issuer " + printable(s.Issuer)
	if s.Repository != "" {
		out += ", repository " + printable(s.Repository)
	}
	if s.Ref != "" {
		out += ", ref " + printable(s.Ref)
	}
	if s.Trigger != "" {
		out += ", trigger " + printable(s.Trigger)
	}
	return out + ")"
}

func signerFromSummary(summary certificate.Summary) *CertSigner {
	return &CertSigner{
		Subject: summary.SubjectAlternativeName, Issuer: summary.Issuer,
		Repository: summary.GithubWorkflowRepository, Ref: summary.GithubWorkflowRef, Trigger: summary.GithubWorkflowTrigger,
	}
}

// signerOf reads who a Fulcio certificate was issued to.
func signerOf(leaf *x509.Certificate) (*CertSigner, error) {
	if leaf == nil {
		return nil, errors.New("the bundle carries no certificate")
	}
	summary, err := certificate.SummarizeCertificate(leaf)
	if err != nil {
		return nil, fmt.Errorf("the certificate: %w", err)
	}
	return signerFromSummary(summary), nil
}

// TrustedRoot is sigstore's trusted_root.json (what `cosign trusted-root create` writes): the
// Fulcio CAs, timestamp authorities, transparency logs and CT logs a keyless signature is checked
// against, offline.
type TrustedRoot struct {
	Path string
	root root.TrustedMaterial
}

// trustedRootFix is what to do about a trusted root that is missing or unreadable: oprov writes
// one itself, through TUF.
const trustedRootFix = "'oprov trusted-root --to FILE' fetches Sigstore's, checked through TUF; give that FILE"

// LoadTrustedRoot reads a trusted root file.
func LoadTrustedRoot(path string) (*TrustedRoot, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("trusted root %s: no such file (%s)", path, trustedRootFix)
	case err != nil:
		return nil, fmt.Errorf("trusted root %s: %w", path, err)
	case len(bytes.TrimSpace(data)) == 0:
		return nil, fmt.Errorf("trusted root %s is empty (%s)", path, trustedRootFix)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("trusted root %s is not a Sigstore trusted_root.json (%s)", path, trustedRootFix)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, fmt.Errorf("trusted root %s lists no certificate authority: it cannot vouch for a keyless signature", path)
	}
	return &TrustedRoot{Path: path, root: tr}, nil
}

// keyless is what a keyless signature carries, ready for sigstore-go's verifier.
type keyless struct {
	entity verify.SignedEntity
	leaf   *x509.Certificate
	// artifact is what the signature is over when it is a message signature (the simple-signing
	// payload); nil for a DSSE envelope, whose statement names the subject's digest.
	artifact []byte
	// times are what proved the signing time, once check passed ("timestamp authority URL at T").
	times []string
	// logged is true once check has verified a transparency-log entry against the trusted root.
	logged bool
}

// newKeylessBundle reads a parsed sigstore bundle that carries a certificate.
func newKeylessBundle(pb *protobundle.Bundle) (*keyless, error) {
	b, err := sgbundle.NewBundle(pb)
	if err != nil {
		return nil, fmt.Errorf("the bundle is malformed: %w", err)
	}
	vc, err := b.VerificationContent()
	if err != nil {
		return nil, fmt.Errorf("the bundle's verification material: %w", err)
	}
	return &keyless{entity: b, leaf: vc.Certificate()}, nil
}

// newKeylessSimpleSigning turns cosign's certificate annotations on a simple-signing layer (a
// .sig tag or an oci-1-1 referrer) into the sigstore bundle they amount to: a message signature
// over the payload, the leaf certificate, the RFC 3161 timestamp when there is one, and the
// Rekor (v1) entry with its signed entry timestamp when there is one (then as a v0.1 bundle,
// the version whose log entries carry a promise rather than a proof).
func newKeylessSimpleSigning(payload, sig []byte, certPEM, tsJSON, rekorJSON string) (*keyless, error) {
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM([]byte(certPEM))
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("the certificate annotation holds no PEM certificate")
	}
	sum := sha256.Sum256(payload)
	pb := &protobundle.Bundle{
		MediaType: bundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_Certificate{Certificate: &protocommon.X509Certificate{RawBytes: certs[0].Raw}},
		},
		Content: &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: sum[:]},
			Signature:     sig,
		}},
	}
	if tsJSON != "" {
		ts, err := parseRFC3161Annotation(tsJSON)
		if err != nil {
			return nil, err
		}
		pb.VerificationMaterial.TimestampVerificationData = &protobundle.TimestampVerificationData{
			Rfc3161Timestamps: []*protocommon.RFC3161SignedTimestamp{{SignedTimestamp: ts}},
		}
	}
	if rekorJSON != "" {
		entry, err := parseRekorAnnotation(rekorJSON)
		if err != nil {
			return nil, err
		}
		pb.MediaType = bundleV01MediaType
		pb.VerificationMaterial.Content = &protobundle.VerificationMaterial_X509CertificateChain{
			X509CertificateChain: &protocommon.X509CertificateChain{Certificates: []*protocommon.X509Certificate{{RawBytes: certs[0].Raw}}},
		}
		pb.VerificationMaterial.TlogEntries = []*protorekor.TransparencyLogEntry{entry}
	}
	k, err := newKeylessBundle(pb)
	if err != nil {
		return nil, err
	}
	k.artifact = payload
	return k, nil
}

const bundleV01MediaType = "application/vnd.dev.sigstore.bundle+json;version=0.1"

// parseRekorAnnotation reads cosign's dev.sigstore.cosign/bundle annotation (a Rekor v1 entry:
// its signed entry timestamp, and the entry's body, time, index and log ID) as a transparency
// log entry with an inclusion promise.
func parseRekorAnnotation(s string) (*protorekor.TransparencyLogEntry, error) {
	var rb struct {
		SignedEntryTimestamp []byte `json:"SignedEntryTimestamp"`
		Payload              struct {
			Body           string `json:"body"`
			IntegratedTime int64  `json:"integratedTime"`
			LogIndex       int64  `json:"logIndex"`
			LogID          string `json:"logID"`
		} `json:"Payload"`
	}
	bad := func(what string, err error) error {
		return fmt.Errorf("the Rekor bundle annotation: %s: %v", what, err)
	}
	if err := json.Unmarshal([]byte(s), &rb); err != nil {
		return nil, bad("not cosign's JSON", err)
	}
	body, err := base64.StdEncoding.DecodeString(rb.Payload.Body)
	if err != nil {
		return nil, bad("body", err)
	}
	logID, err := hex.DecodeString(rb.Payload.LogID)
	if err != nil {
		return nil, bad("log ID", err)
	}
	var kv struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(body, &kv); err != nil || kv.Kind == "" {
		return nil, bad("the entry's kind", err)
	}
	if len(rb.SignedEntryTimestamp) == 0 {
		return nil, bad("signed entry timestamp", errors.New("missing"))
	}
	return &protorekor.TransparencyLogEntry{
		LogIndex:          rb.Payload.LogIndex,
		LogId:             &protocommon.LogId{KeyId: logID},
		KindVersion:       &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion},
		IntegratedTime:    rb.Payload.IntegratedTime,
		InclusionPromise:  &protorekor.InclusionPromise{SignedEntryTimestamp: rb.SignedEntryTimestamp},
		CanonicalizedBody: body,
	}, nil
}

// check verifies a keyless signature against the trusted root, offline: the certificate chains
// to a Fulcio CA of the root, its SCT checks when the root lists CT logs, the signing time is
// proven by a transparency-log entry or an RFC 3161 timestamp of the root and lies inside the
// certificate's validity, and the signature is over want (the subject's digest for a DSSE
// statement; the payload for a message signature). Then the certificate's identity must match
// one of ids. It returns who signed.
func (k *keyless) check(tr *TrustedRoot, ids []Identity, want digest.Digest) (*CertSigner, error) {
	if k.leaf == nil {
		return nil, errors.New("the bundle carries no certificate")
	}
	summary, err := certificate.SummarizeCertificate(k.leaf)
	if err != nil {
		return nil, fmt.Errorf("the certificate: %w", err)
	}
	who := signerFromSummary(summary)
	if tr == nil {
		return who, fmt.Errorf("keyless signature by %s, and no trusted root to check it against (give --trusted-root or trusted_root in the policy)", who)
	}
	opts := []verify.VerifierOption{verify.WithObserverTimestamps(1)}
	if len(tr.root.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	logged := false
	if entries, _ := k.entity.TlogEntries(); len(entries) > 0 && len(tr.root.RekorLogs()) > 0 {
		opts = append(opts, verify.WithTransparencyLog(1))
		logged = true
	}
	v, err := verify.NewVerifier(tr.root, opts...)
	if err != nil {
		return who, err
	}
	var art verify.ArtifactPolicyOption
	if k.artifact != nil {
		art = verify.WithArtifact(bytes.NewReader(k.artifact))
	} else {
		raw, err := hex.DecodeString(want.Encoded())
		if err != nil {
			return who, err
		}
		art = verify.WithArtifactDigest(want.Algorithm().String(), raw)
	}
	res, err := v.Verify(k.entity, verify.NewPolicy(art, verify.WithoutIdentitiesUnsafe()))
	if err != nil {
		return who, explainKeyless(err, k.leaf, tr)
	}
	k.times, k.logged = nil, logged
	for _, ts := range res.VerifiedTimestamps {
		what := "timestamp authority"
		if ts.Type == "Tlog" {
			what = "transparency log"
		}
		k.times = append(k.times, fmt.Sprintf("%s %s at %s", what, ts.URI, ts.Timestamp.UTC().Format(time.RFC3339)))
	}
	if len(ids) == 0 {
		return who, fmt.Errorf("keyless signature by %s, and the rule trusts no identity (add an identity, or --certificate-identity and --certificate-oidc-issuer)", who)
	}
	for _, id := range ids {
		m, err := id.matcher()
		if err != nil {
			return who, err
		}
		if m.Verify(summary) == nil {
			return who, nil
		}
	}
	// Say which claim failed, per trusted identity: a signer and an identity that differ in one
	// claim (often a repository the certificate does not carry) otherwise read alike.
	var why []string
	for _, id := range ids {
		d := id.differences(summary)
		if len(d) == 0 { // the matcher refused for a reason this does not know: show the identity
			d = []string{"does not match"}
		}
		why = append(why, fmt.Sprintf("the certificate %s (trusted: %s)", strings.Join(d, " and "), id))
	}
	return who, fmt.Errorf("keyless signature by %s: not a trusted identity: %s", who, strings.Join(why, "; "))
}

// differences says which of the certificate's claims do not match the identity, each as "has
// CLAIM X, not Y" or "has no CLAIM claim"; none when all match.
func (id Identity) differences(s certificate.Summary) []string {
	var out []string
	match := func(name, got, exact, re string) {
		switch {
		case exact != "" && got != exact:
			out = append(out, fmt.Sprintf("has %s %s, not %s", name, printable(got), exact))
		case re != "":
			if m, err := regexp.MatchString(re, got); err == nil && !m {
				out = append(out, fmt.Sprintf("has %s %s, which does not match %s", name, printable(got), re))
			}
		}
	}
	match("subject", s.SubjectAlternativeName, id.Subject, id.SubjectRegexp)
	match("issuer", s.Issuer, id.Issuer, id.IssuerRegexp)
	claim := func(name, got, want string) {
		switch {
		case want == "" || got == want:
		case got == "":
			out = append(out, fmt.Sprintf("has no %s claim, which the identity requires (%s)", name, want))
		default:
			out = append(out, fmt.Sprintf("has %s %s, not %s", name, printable(got), want))
		}
	}
	claim("repository", s.GithubWorkflowRepository, id.Repository)
	claim("ref", s.GithubWorkflowRef, id.Ref)
	claim("trigger", s.GithubWorkflowTrigger, id.Trigger)
	return out
}

// explainKeyless says in a user's words why sigstore-go refused a keyless signature, keeping
// its own words after.
func explainKeyless(err error, leaf *x509.Certificate, tr *TrustedRoot) error {
	// sigstore-go formats a nil error list into its threshold message; leave that out.
	msg := strings.ReplaceAll(err.Error(), "; error: %!w(<nil>)", "")
	err = errors.New(msg)
	validity := fmt.Sprintf("valid %s to %s", leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	switch {
	case strings.Contains(msg, "threshold not met for verified signed & log entry integrated timestamps"),
		strings.Contains(msg, "no valid observer timestamps"):
		return fmt.Errorf("no trusted time: neither an RFC 3161 timestamp by a timestamp authority of %s nor a transparency-log entry proves when the certificate (%s) was used: %w", tr.Path, validity, err)
	case strings.Contains(msg, "expired or is not yet valid"), strings.Contains(msg, "outside certificate validity"):
		return fmt.Errorf("the certificate was used outside its validity (%s) by the trusted time: %w", validity, err)
	case strings.Contains(msg, "unknown authority"), strings.Contains(msg, "failed to verify leaf certificate"):
		return fmt.Errorf("the certificate (issued by %q) does not chain to a certificate authority of %s: %w", leaf.Issuer.String(), tr.Path, err)
	case strings.Contains(msg, "log inclusion"), strings.Contains(msg, "tlog"):
		return fmt.Errorf("the transparency-log entry does not check against a log of %s (the bundle was altered, or the log is not trusted): %w", tr.Path, err)
	case strings.Contains(msg, "signed certificate timestamp"):
		return fmt.Errorf("the certificate's SCT does not check against a CT log of %s: %w", tr.Path, err)
	case strings.Contains(msg, "artifact"), strings.Contains(msg, "signature"), strings.Contains(msg, "digest"):
		return fmt.Errorf("the signature does not verify (the bundle or what it signs was altered): %w", err)
	}
	return err
}

// parseRFC3161Annotation reads cosign's dev.sigstore.cosign/rfc3161timestamp annotation: JSON
// with the DER timestamp response in base64.
func parseRFC3161Annotation(s string) ([]byte, error) {
	var ts struct {
		SignedRFC3161Timestamp []byte `json:"SignedRFC3161Timestamp"`
	}
	if err := json.Unmarshal([]byte(s), &ts); err != nil || len(ts.SignedRFC3161Timestamp) == 0 {
		return nil, fmt.Errorf("the RFC 3161 timestamp annotation is not cosign's JSON with a SignedRFC3161Timestamp")
	}
	return ts.SignedRFC3161Timestamp, nil
}
