package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/sign"
)

func TestKeygen(t *testing.T) {
	ctx := context.Background()
	t.Setenv("COSIGN_PASSWORD", "pw")
	prefix := filepath.Join(t.TempDir(), "release")
	ios, out, _ := testIO()
	if err := runKeygen(ctx, &keygenOptions{io: ios, Prefix: prefix}); err != nil {
		t.Fatal(err)
	}
	want := "Private key written to " + prefix + ".key\nPublic key written to " + prefix + ".pub\n"
	if out.String() != want {
		t.Errorf("keygen output %q, want %q", out, want)
	}
	pub, err := os.ReadFile(prefix + ".pub")
	if err != nil || !bytes.HasPrefix(pub, []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Fatalf("public key: %v %q", err, pub)
	}
	if _, err := sign.LoadPublicKey(prefix + ".pub"); err != nil {
		t.Errorf("the public key does not load: %v", err)
	}
	if _, err := sign.LoadSigner(prefix+".key", sign.EnvPassword(nil)); err != nil {
		t.Errorf("the private key does not open with COSIGN_PASSWORD: %v", err)
	}

	// Existing files are never overwritten.
	ios, out, _ = testIO()
	wantErrorContaining(t, runKeygen(ctx, &keygenOptions{io: ios, Prefix: prefix}), "keygen: ")
	if again, _ := os.ReadFile(prefix + ".pub"); !bytes.Equal(again, pub) {
		t.Error("a second keygen overwrote the public key")
	}
	if out.Len() != 0 {
		t.Errorf("a failed keygen printed %q", out)
	}
}

func TestSignVerifyLayout(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	key, pub := keyPair(t, "trusted")
	_, otherPub := keyPair(t, "other")

	// Nothing signed yet: verification fails.
	ios, out, _ := testIO()
	verify := &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{pub}, AllZips: true, output: textOut}
	wantErrorContaining(t, runVerify(ctx, verify), "("+digest+"): not signed")
	if out.Len() != 0 {
		t.Errorf("a failed verify printed %q", out)
	}

	ios, out, _ = testIO()
	if err := runSign(ctx, &signOptions{io: ios, Ref: repo + ":1.0.0", Key: key, output: textOut}); err != nil {
		t.Fatal(err)
	}
	prefix := "Signed " + repo + ":1.0.0 (" + digest + ") as a bundle signature: sha256:"
	if !strings.HasPrefix(out.String(), prefix) {
		t.Errorf("sign output %q, want it to start %q", out, prefix)
	}
	sig := strings.TrimSpace(strings.TrimPrefix(out.String(), prefix[:len(prefix)-len("sha256:")]))

	ios, out, _ = testIO()
	verify.io = ios
	if err := runVerify(ctx, verify); err != nil {
		t.Fatal(err)
	}
	want := "Verified " + repo + ":1.0.0 (" + digest + ")\n" +
		"  signature " + sig + " (bundle) by " + pub + "\n" +
		"  darwin_arm64   manifest and zip checked\n" +
		"  linux_amd64    manifest and zip checked\n"
	if out.String() != want {
		t.Errorf("verify output:\n%s\nwant:\n%s", out, want)
	}

	// A key that did not sign is refused.
	ios, out, _ = testIO()
	wantErrorContaining(t, runVerify(ctx, &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{otherPub}, output: textOut}), "none by a trusted key (trusted: "+otherPub+")")
	if out.Len() != 0 {
		t.Errorf("a refused verify printed %q", out)
	}
}

func TestVerifyFetchesTheZipsAskedFor(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, false)

	// Only the zips asked for are fetched: this machine's by default, else those named.
	host := runtime.GOOS + "_" + runtime.GOARCH
	other := "darwin_arm64"
	if host == other {
		other = "linux_amd64"
	}
	ios, out, _ := testIO()
	if err := runVerify(ctx, &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{pub}, output: textOut}); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("  %-14s manifest checked\n", other); !strings.Contains(out.String(), want) {
		t.Errorf("verify without --platform fetched more than this machine's zip:\n%s", out)
	}
	if want := fmt.Sprintf("  %-14s manifest and zip checked\n", host); (host == "linux_amd64" || host == "darwin_arm64") && !strings.Contains(out.String(), want) {
		t.Errorf("verify without --platform did not fetch this machine's zip:\n%s", out)
	}
	ios, out, _ = testIO()
	if err := runVerify(ctx, &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{pub}, Platforms: []string{other}, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Verified bool   `json:"verified"`
		Mode     string `json:"mode"`
		Rule     string `json:"rule"`
		Result   struct {
			Digest    string `json:"index_digest"`
			Platforms []struct {
				Platform string `json:"platform"`
				Fetched  bool   `json:"zip_fetched"`
			} `json:"platforms"`
		} `json:"result"`
	}
	decodeJSON(t, out, &res)
	if !res.Verified || res.Mode != "enforce" || res.Rule != "" || res.Result.Digest != digest {
		t.Errorf("verify --key JSON: %+v", res)
	}
	for _, p := range res.Result.Platforms {
		if p.Fetched != (p.Platform == other) {
			t.Errorf("%s: zip fetched %v", p.Platform, p.Fetched)
		}
	}
}

func TestSignLegacyTag(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	key, pub := keyPair(t, "k")
	ios, out, _ := testIO()
	if err := runSign(ctx, &signOptions{io: ios, Ref: repo + ":1.0.0", Key: key, LegacyTag: true, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var signed sign.SignResult
	decodeJSON(t, out, &signed)
	if signed.Form != sign.FormLegacy || signed.Subject.String() != digest || signed.Tag != manifest.CosignSignatureTag(signed.Subject) {
		t.Errorf("sign --legacy-tag: %+v", signed)
	}
	ios, out, _ = testIO()
	if err := runVerify(ctx, &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{pub}, output: textOut}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(legacy-tag) by "+pub) {
		t.Errorf("verify did not find the legacy signature:\n%s", out)
	}
}

func TestVerifyPolicy(t *testing.T) {
	ctx := context.Background()
	repo, _ := pushedLayout(t)
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, false)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.hcl")
	writePolicy := func(src string) {
		if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writePolicy(`trust "acme" {
  providers = ["example.com/acme/hello"]
  keys      = ["` + pub + `"]
}
`)
	ios, out, errb := testIO()
	v := &verifyOptions{io: ios, Ref: repo + ":1.0.0", Policy: policy, Address: "example.com/acme/hello", output: jsonOut}
	if err := runVerify(ctx, v); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Verified bool   `json:"verified"`
		Rule     string `json:"rule"`
		Mode     string `json:"mode"`
		Warning  string `json:"warning"`
	}
	decodeJSON(t, out, &res)
	if !res.Verified || res.Rule != "acme" || res.Mode != "enforce" || res.Warning != "" || errb.Len() != 0 {
		t.Errorf("policy verify: %+v, stderr %q", res, errb)
	}

	// No rule covers another provider: enforce refuses it, warn reports it and succeeds.
	v.Address = "example.com/acme/other"
	wantErrorContaining(t, runVerify(ctx, v), "no trust rule in "+policy+" covers example.com/acme/other")
	writePolicy(`mode = "warn"
trust "acme" {
  providers = ["example.com/acme/hello"]
  keys      = ["` + pub + `"]
}
`)
	ios, out, errb = testIO()
	v.io = ios
	if err := runVerify(ctx, v); err != nil {
		t.Fatalf("warn mode failed: %v", err)
	}
	res.Verified, res.Warning = true, ""
	decodeJSON(t, out, &res)
	if res.Verified || res.Mode != "warn" || !strings.Contains(res.Warning, "no trust rule") {
		t.Errorf("warn-mode JSON: %+v", res)
	}
	if !strings.HasPrefix(errb.String(), "oprov: warning (policy mode warn): ") {
		t.Errorf("warn-mode stderr %q", errb)
	}
}

func TestSignVerifyUsageErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	layout := "oci-layout:" + t.TempDir()
	wantUsageError(t, runSign(ctx, &signOptions{io: ios, Ref: layout, Key: "k.key", output: textOut}), "name a version")
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: layout + ":1.0.0", output: textOut}), "give --key PUB (one or more) or --policy FILE")
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: layout + ":1.0.0", Keys: []string{"a.pub"}, Policy: "p.hcl", output: textOut}), "give --key PUB (one or more) or --policy FILE")
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: layout + ":1.0.0", Keys: []string{"a.pub"}, Platforms: []string{"x"}, output: textOut}), "--platform")
	_, pub := keyPair(t, "k")
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: layout + ":1.0.0", Keys: []string{pub}, Address: "a/b/c/d/e", output: textOut}), "--address")
	// A key file that does not exist is a bad argument: exit 2, as verify-blob.
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: layout + ":1.0.0", Keys: []string{"missing.pub"}, output: textOut}), "public key: ")
}

// TestSignKeylessUsageErrors: keyless signing says what it lacks (a token, a Fulcio, a time
// witness) before it reaches a registry, and refuses a key with the keyless flags.
func TestSignKeylessUsageErrors(t *testing.T) {
	t.Setenv(sign.IDTokenEnv, "")
	t.Setenv("ACTIONS_ID_TOKEN_REQUEST_URL", "") // not in a GitHub Actions job, even when the tests run in one
	t.Setenv(signingConfigEnv, "")
	ctx := context.Background()
	ios, _, _ := testIO()
	ref := "oci-layout:" + t.TempDir() + ":1.0.0"
	try := func(k keylessSignFlags, key string, legacy bool) error {
		return runSign(ctx, &signOptions{io: ios, Ref: ref, Key: key, keyless: k, LegacyTag: legacy, output: textOut})
	}
	wantUsageError(t, try(keylessSignFlags{}, "", false), "identity token")
	wantUsageError(t, try(keylessSignFlags{FulcioURL: "http://f", TSAURLs: []string{"http://t"}}, "", false), "identity token")
	wantUsageError(t, try(keylessSignFlags{IDToken: "x", TSAURLs: []string{"http://t"}}, "", false), "Fulcio URL")
	wantUsageError(t, try(keylessSignFlags{IDToken: "x", FulcioURL: "http://f"}, "", false), "timestamp authority or a transparency log")
	wantUsageError(t, try(keylessSignFlags{IDToken: "x"}, "k.key", false), "not both")
	wantUsageError(t, try(keylessSignFlags{IDToken: "x", FulcioURL: "http://f", TSAURLs: []string{"http://t"}}, "", true), "drop --legacy-tag")
}

// TestVerifyKeylessUsageErrors: identity flags need a trusted root and an issuer, and do not go
// with --policy; all said before any registry request.
func TestVerifyKeylessUsageErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	ref := "oci-layout:" + t.TempDir() + ":1.0.0"
	id := keylessFlags{Identity: "https://github.com/acme/p/.github/workflows/r.yml@refs/tags/v1", Issuer: "https://token.actions.githubusercontent.com"}
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: ref, keyless: id, output: textOut}), "needs a trusted root")
	noIssuer := id
	noIssuer.Issuer, noIssuer.TrustedRoot = "", filepath.Join(t.TempDir(), "missing.json")
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: ref, keyless: noIssuer, output: textOut}), "needs an OIDC issuer")
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: ref, keyless: id, Policy: "p.hcl", output: textOut}), "give --key PUB (one or more) or --policy FILE")
	badRE := keylessFlags{IdentityRegexp: "(", Issuer: "https://i"}
	wantUsageError(t, runVerify(ctx, &verifyOptions{io: ios, Ref: ref, keyless: badRE, output: textOut}), "bad regular expression")
}
