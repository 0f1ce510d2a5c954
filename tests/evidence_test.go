package tests

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// keyHint is a public key's hint as sigstore names keys: base64 of the SHA-256 of its DER.
func keyHint(t *testing.T, pubPath string) string {
	t.Helper()
	data, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s holds no PEM", pubPath)
	}
	if _, err := x509.ParsePKIXPublicKey(b.Bytes); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b.Bytes)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// replaceInTree replaces old by new in every file under dir, as an attacker who can write the
// cache would; it returns how many files it changed.
func replaceInTree(t *testing.T, dir string, old, new []byte) int {
	t.Helper()
	n := 0
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, old) {
			return nil
		}
		os.Chmod(p, 0o644)
		if err := os.WriteFile(p, bytes.ReplaceAll(data, old, new), 0o644); err != nil {
			t.Fatal(err)
		}
		n++
		return nil
	})
	return n
}

// TestForgedEvidenceIsRefused: a version signed by key B is installed under a policy trusting B;
// then every occurrence of B's hint in the cache is replaced by key A's, verdicts such as older
// oprovs kept are planted in the version records, the policy is switched to trust only A, and the
// lock pins that version: install, init, run and schema refuse it, offline too.
func TestForgedEvidenceIsRefused(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	mustOprov(t, f.env, "lock", "-C", f.cfg)
	if r := mustOprov(t, f.env, "install", "-C", f.cfg); !strings.Contains(r.Stdout, "signature verified") {
		t.Fatalf("the first install does not say it verified the signature:\n%s", r.Stdout)
	}
	if r := mustOprov(t, f.env, "cache", "verify", "--key", filepath.Join(f.keys, "cosign.pub")); !strings.Contains(r.Stdout, "signed ") {
		t.Errorf("cache verify --key B does not judge the cached version signed:\n%s", r.Stdout)
	}
	keysA := t.TempDir()
	mustOprov(t, f.env, "keygen", "--output-key-prefix", filepath.Join(keysA, "cosign"))
	hintA, hintB := keyHint(t, filepath.Join(keysA, "cosign.pub")), keyHint(t, filepath.Join(f.keys, "cosign.pub"))
	replaceInTree(t, f.cache, []byte(hintB), []byte(hintA))
	// What an older oprov took as proof, planted in every version record.
	versions, _ := filepath.Glob(filepath.Join(f.cache, "versions", "*", "providers", "acme", "hello", "*.json"))
	if len(versions) == 0 {
		t.Fatal("no version record in the cache to forge")
	}
	for _, p := range versions {
		data, _ := os.ReadFile(p)
		forged := strings.Replace(string(data), "{", `{"verified_by":["`+hintA+`"],"verified_keys":["cosign.pub"],`, 1)
		writeFile(t, p, forged)
	}
	writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), strings.ReplaceAll(mustRead(t, filepath.Join(f.cfg, "oprov.hcl")), f.keys, keysA))

	if r := oprov(t, f.env, "cache", "verify", "--key", filepath.Join(keysA, "cosign.pub")); r.Code == 0 || strings.Contains(r.Stdout, "signed ") {
		t.Errorf("cache verify --key A passed the forged cache: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	check := func(t *testing.T, what string, r result) {
		t.Helper()
		if r.Code == 0 || strings.Contains(r.Stdout+r.Stderr, "signature verified") {
			t.Errorf("%s under a policy trusting only key A: exit %d\n%s%s", what, r.Code, r.Stdout, r.Stderr)
		}
	}
	for _, offline := range []bool{false, true} {
		name := "online"
		if offline {
			name = "offline"
			f.reg.Stop()
		}
		t.Run(name, func(t *testing.T) {
			env := append(f.env, "OPROV_TOFU="+tofu)
			check(t, "install", oprov(t, env, "install", "-C", f.freshCopy(t)))
			check(t, "init", oprov(t, env, "init", "-C", f.freshCopy(t)))
			check(t, "run", oprov(t, env, "run", "-C", f.freshCopy(t), "--", tofu, "plan", "-input=false"))
			check(t, "schema", oprov(t, env, "schema", f.repo+":1.0.0", "--address", "example.com/acme/hello", "--key", filepath.Join(keysA, "cosign.pub")))
		})
	}
}
