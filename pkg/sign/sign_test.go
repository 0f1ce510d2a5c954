package sign

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// layoutWithVersion pushes a tiny release of the given version into a new OCI layout.
func layoutWithVersion(t *testing.T, dir, version, content string) (oci.Target, oci.Ref) {
	t.Helper()
	ref := oci.Ref{Layout: dir, Reference: version}
	target, err := oci.NewClient(oci.Options{}).Open(context.Background(), ref, true)
	if err != nil {
		t.Fatal(err)
	}
	return target, pushVersion(t, target, dir, version, content)
}

// pushVersion pushes a tiny release of the given version into target.
func pushVersion(t *testing.T, target oci.Target, dir, version, content string) oci.Ref {
	t.Helper()
	bin := t.TempDir()
	os.MkdirAll(filepath.Join(bin, "linux_amd64"), 0o755)
	os.WriteFile(filepath.Join(bin, "linux_amd64", "terraform-provider-x"), []byte(content), 0o755)
	p, err := providerrelease.PackageBinaries(bin, providerrelease.PackageOptions{Type: "x", Version: version, OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := artifact.PushRelease(context.Background(), target, p.Release, version, artifact.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	return oci.Ref{Layout: dir, Reference: version}
}

func testKeys(t *testing.T, prefix string) (*Signer, PublicKey) {
	t.Helper()
	t.Setenv(PasswordEnv, "test-password")
	key, pub, err := GenerateKeyPair(filepath.Join(t.TempDir(), prefix), EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(key, EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if pk.Hint != s.Public.Hint {
		t.Fatalf("public key hint %s differs from the signer's %s", pk.Hint, s.Public.Hint)
	}
	return s, pk
}

func TestSignAndVerifyBothForms(t *testing.T) {
	ctx := context.Background()
	signer, pub := testKeys(t, "good")
	_, other := testKeys(t, "other")
	for _, legacy := range []bool{false, true} {
		dir := t.TempDir()
		target, ref := layoutWithVersion(t, dir, "1.0.0", "v1")
		if _, err := Verify(ctx, target, ref, VerifyOptions{Keys: []PublicKey{pub}}); err == nil || !strings.Contains(err.Error(), "not signed") {
			t.Fatalf("unsigned version: err = %v", err)
		} else if want := "'oprov sign " + ref.Repo() + ":" + ref.Reference + " "; !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "REPO") {
			// The hint, pasted, names this version, not a placeholder.
			t.Errorf("unsigned version: %v; want the hint to name %s", err, want)
		}
		v, _ := artifact.ResolveVersion(ctx, target, ref, oci.Limits{})
		res, err := Sign(ctx, target, ref, v.Index, signer, SignOptions{Legacy: legacy})
		if err != nil {
			t.Fatal(err)
		}
		got, err := Verify(ctx, target, ref, VerifyOptions{Keys: []PublicKey{other, pub}, AllZips: true})
		if err != nil {
			t.Fatalf("legacy=%v: %v", legacy, err)
		}
		if len(got.Signatures) != 1 || got.Signatures[0].Form != res.Form || !got.Platforms[0].Fetched {
			t.Errorf("legacy=%v: result %+v", legacy, got)
		}
		if _, err := Verify(ctx, target, ref, VerifyOptions{Keys: []PublicKey{other}}); err == nil || !strings.Contains(err.Error(), "none by a trusted key") {
			t.Errorf("legacy=%v: untrusted key: err = %v", legacy, err)
		}
		// The layout keeps the signature across reopening (referrers must persist on disk).
		reopened, _ := oci.NewClient(oci.Options{}).Open(ctx, ref, false)
		if _, err := Verify(ctx, reopened, ref, VerifyOptions{Keys: []PublicKey{pub}}); err != nil {
			t.Errorf("legacy=%v: after reopening the layout: %v", legacy, err)
		}
	}
}

// A signature made for one version, stored as if it were another's, is refused.
func TestVerifyRefusesReplayedSignature(t *testing.T) {
	ctx := context.Background()
	signer, pub := testKeys(t, "good")
	dir := t.TempDir()
	target, ref1 := layoutWithVersion(t, dir, "1.0.0", "v1")
	ref2 := pushVersion(t, target, dir, "2.0.0", "v2")
	v1, _ := artifact.ResolveVersion(ctx, target, ref1, oci.Limits{})
	v2, _ := artifact.ResolveVersion(ctx, target, ref2, oci.Limits{})
	res, err := Sign(ctx, target, ref1, v1.Index, signer, SignOptions{Legacy: true})
	if err != nil {
		t.Fatal(err)
	}
	sigDesc, _ := target.Resolve(ctx, res.Tag)
	if err := target.Tag(ctx, sigDesc, manifest.CosignSignatureTag(v2.Index.Digest)); err != nil {
		t.Fatal(err)
	}
	_, err = Verify(ctx, target, ref2, VerifyOptions{Keys: []PublicKey{pub}})
	if err == nil || !strings.Contains(err.Error(), "names "+v1.Index.Digest.String()+", not "+v2.Index.Digest.String()) {
		t.Fatalf("replayed signature: err = %v", err)
	}
	if !strings.Contains(err.Error(), "2.0.0") || !strings.Contains(err.Error(), v2.Index.Digest.String()) {
		t.Errorf("the error should name the version and digest: %v", err)
	}
}

// A tag moved onto another validly signed version is refused.
func TestVerifyRefusesMovedTag(t *testing.T) {
	ctx := context.Background()
	signer, pub := testKeys(t, "good")
	dir := t.TempDir()
	target, ref1 := layoutWithVersion(t, dir, "1.0.0", "v1")
	ref2 := pushVersion(t, target, dir, "2.0.0", "v2")
	v1, _ := artifact.ResolveVersion(ctx, target, ref1, oci.Limits{})
	if _, err := Sign(ctx, target, ref1, v1.Index, signer, SignOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := target.Tag(ctx, v1.Index, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	_, err := Verify(ctx, target, ref2, VerifyOptions{Keys: []PublicKey{pub}})
	if err == nil || !strings.Contains(err.Error(), "the tag was moved") {
		t.Fatalf("moved tag: err = %v", err)
	}
}

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	_, pub := testKeys(t, "acme")
	pemData, _ := os.ReadFile(filepath.Join(filepath.Dir(pub.Name), "acme.pub"))
	os.WriteFile(filepath.Join(dir, "acme.pub"), pemData, 0o644)
	src := `
mode = "enforce"

trust "acme" {
  providers    = ["example.com/acme/*"]
  repositories = ["registry.example.com/providers/acme/**"]
  keys         = ["acme.pub"]
}

trust "lab" {
  repositories = ["127.0.0.1:*/lab/*"]
  keys         = [<<EOT
` + string(pemData) + `EOT
  ]
  mode = "warn"
}
`
	p, err := parsePolicy(filepath.Join(dir, "policy.hcl"), []byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ repo, provider, want string }{
		{"registry.example.com/providers/acme/hello", "", "acme"},
		{"registry.example.com/providers/acme/deep/hello", "", "acme"},
		{"elsewhere.io/x/hello", "example.com/acme/hello", "acme"},
		{"127.0.0.1:5000/lab/hello", "", "lab"},
		{"registry.example.com/providers/other/hello", "example.com/other/hello", ""},
	} {
		if matchPattern("**", c.repo) != true {
			t.Errorf("** does not match %s", c.repo)
		}
		r := p.Match(c.repo, c.provider)
		got := ""
		if r != nil {
			got = r.Name
		}
		if got != c.want {
			t.Errorf("Match(%q, %q) = %q, want %q", c.repo, c.provider, got, c.want)
		}
	}
	if p.Rules[1].Mode != ModeWarn || p.Rules[0].Mode != ModeEnforce || len(p.Rules[1].Keys) != 1 {
		t.Errorf("rules: %+v", p.Rules)
	}

	for name, bad := range map[string]struct{ src, want string }{
		"syntax":       {"trust \"a\" {\n  keys = [\n", "policy.hcl:"},
		"bad mode":     {"mode = \"maybe\"\n", `mode "maybe"`},
		"no keys":      {"trust \"a\" {\n  providers = [\"a/b/c\"]\n  keys = []\n}\n", "policy.hcl:1: trust \"a\" lists no keys"},
		"missing key":  {"trust \"a\" {\n  providers = [\"a/b/c\"]\n  keys = [\"nope.pub\"]\n}\n", "nope.pub"},
		"matches none": {"\n\ntrust \"a\" {\n  keys = [\"acme.pub\"]\n}\n", "policy.hcl:3: trust \"a\" matches nothing"},
		"unknown attr": {"trust \"a\" {\n  keyz = []\n}\n", "policy.hcl:2"},
	} {
		_, err := parsePolicy(filepath.Join(dir, "policy.hcl"), []byte(bad.src), nil)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %q", name, err, bad.want)
		}
	}
}

func TestPolicyModes(t *testing.T) {
	ctx := context.Background()
	_, pub := testKeys(t, "k")
	target, ref := layoutWithVersion(t, t.TempDir(), "1.0.0", "v1")
	repo := ref.Repo()
	enforce := &Policy{Path: "p.hcl", Mode: ModeEnforce, Rules: []*Rule{{Name: "r", Repositories: []string{repo}, Keys: []PublicKey{pub}, Mode: ModeEnforce}}}
	if _, err := enforce.VerifyWithPolicy(ctx, target, ref, "", VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("enforce, unsigned: err = %v", err)
	}
	warn := &Policy{Path: "p.hcl", Mode: ModeWarn, Rules: []*Rule{{Name: "r", Repositories: []string{repo}, Keys: []PublicKey{pub}, Mode: ModeWarn}}}
	d, err := warn.VerifyWithPolicy(ctx, target, ref, "", VerifyOptions{})
	if err != nil || d.Warning == nil || !strings.Contains(d.Warning.Error(), "not signed") {
		t.Errorf("warn, unsigned: %+v, %v", d, err)
	}
	none := &Policy{Path: "p.hcl", Mode: ModeEnforce}
	if _, err := none.VerifyWithPolicy(ctx, target, ref, "", VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "no trust rule in p.hcl covers") {
		t.Errorf("no rule: err = %v", err)
	}
}

func TestGenerateKeyPairRefusesOverwrite(t *testing.T) {
	t.Setenv(PasswordEnv, "")
	prefix := filepath.Join(t.TempDir(), "k")
	if _, _, err := GenerateKeyPair(prefix, EnvPassword(nil)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := GenerateKeyPair(prefix, EnvPassword(nil)); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second keygen: %v", err)
	}
	t.Setenv(PasswordEnv, "wrong")
	if _, err := LoadSigner(prefix+".key", EnvPassword(nil)); err == nil || !strings.Contains(err.Error(), "wrong COSIGN_PASSWORD") {
		t.Errorf("wrong password: %v", err)
	}
}
