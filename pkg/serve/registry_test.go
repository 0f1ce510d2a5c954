package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/oprov/oprov/pkg/sign"
)

const regBase = "/v1/providers/example.com/acme/hello/"

// testSigningKey writes an armored OpenPGP secret key (encrypted with passphrase when it is not
// "") and gives its path and entity.
func testSigningKey(t *testing.T, passphrase string) (string, *openpgp.Entity) {
	t.Helper()
	e, err := openpgp.NewEntity("oprov test", "", "test@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PrivateKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if passphrase != "" {
		if err := e.EncryptPrivateKeys([]byte(passphrase), nil); err != nil {
			t.Fatal(err)
		}
		err = e.SerializePrivateWithoutSigning(w, nil)
	} else {
		err = e.SerializePrivate(w, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	path := filepath.Join(t.TempDir(), "signing.asc")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, e
}

// registryServer is a layout fixture's server with a signing key, answering providers.v1 for
// example.com.
func (f *layoutFixture) registryServer(t *testing.T, policy *sign.Policy, max int) *testServer {
	t.Helper()
	keyPath, _ := testSigningKey(t, "")
	signer, err := LoadSigner(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	s := f.server(t, policy, time.Minute)
	s.cfg.Signer, s.cfg.MaxRegistryVersions = signer, max
	s.SetRegistryHostname("example.com")
	s.h = s.Handler()
	return s
}

type registryVersions struct {
	Versions []struct {
		Version   string   `json:"version"`
		Protocols []string `json:"protocols"`
		Platforms []struct{ OS, Arch string }
	} `json:"versions"`
}

type registryDownload struct {
	Protocols           []string `json:"protocols"`
	OS                  string   `json:"os"`
	Arch                string   `json:"arch"`
	Filename            string   `json:"filename"`
	DownloadURL         string   `json:"download_url"`
	SHASumsURL          string   `json:"shasums_url"`
	SHASumsSignatureURL string   `json:"shasums_signature_url"`
	SHASum              string   `json:"shasum"`
	SigningKeys         struct {
		GPGPublicKeys []struct {
			KeyID      string `json:"key_id"`
			ASCIIArmor string `json:"ascii_armor"`
		} `json:"gpg_public_keys"`
	} `json:"signing_keys"`
}

func getJSON(t *testing.T, s *testServer, path string, v any) {
	t.Helper()
	code, body := s.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

// TestRegistryProtocol: discovery names providers.v1; versions lists only the signed version, with
// its platforms; download gives the zip's URL and sha256, the SHA256SUMS and signature URLs and the
// key; the signature verifies with that key over SHA256SUMS, which lists the zip's sha256, and the
// zip the URL names has it. The unsigned version's download and sums are refused.
func TestRegistryProtocol(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true, "1.1.0": false})
	s := f.registryServer(t, f.keyPolicy(t), 0)
	var disco map[string]string
	getJSON(t, s, "/.well-known/terraform.json", &disco)
	if disco["providers.v1"] != regBase[:len(regBase)-len("acme/hello/")] {
		t.Fatalf("discovery: %v, want providers.v1 /v1/providers/example.com/", disco)
	}
	var vs registryVersions
	getJSON(t, s, regBase+"versions", &vs)
	if len(vs.Versions) != 1 || vs.Versions[0].Version != "1.0.0" || len(vs.Versions[0].Platforms) != len(testPlatforms) || vs.Versions[0].Protocols == nil {
		t.Fatalf("versions: %+v, want 1.0.0 alone with %d platforms", vs, len(testPlatforms))
	}
	var d registryDownload
	getJSON(t, s, regBase+"1.0.0/download/linux/amd64", &d)
	zh := strings.TrimPrefix(f.hashes["1.0.0"][testPlatforms[0]].ZH, "zh:")
	if d.OS != "linux" || d.Arch != "amd64" || d.Filename != "terraform-provider-hello_1.0.0_linux_amd64.zip" || d.SHASum != zh ||
		len(d.SigningKeys.GPGPublicKeys) != 1 || d.DownloadURL != base+d.Filename {
		t.Fatalf("download: %+v", d)
	}
	code, sums := s.get(t, d.SHASumsURL)
	if code != http.StatusOK || !strings.Contains(string(sums), zh+"  "+d.Filename+"\n") || strings.Count(string(sums), "\n") != len(testPlatforms) {
		t.Fatalf("SHA256SUMS: %d %s", code, sums)
	}
	code, sig := s.get(t, d.SHASumsSignatureURL)
	if code != http.StatusOK {
		t.Fatalf("signature: %d %s", code, sig)
	}
	k := d.SigningKeys.GPGPublicKeys[0]
	keyring, err := openpgp.ReadArmoredKeyRing(strings.NewReader(k.ASCIIArmor))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(sums), bytes.NewReader(sig), nil)
	if err != nil {
		t.Fatalf("the signature does not verify with the key the answer gives: %v", err)
	}
	if got := strings.ToUpper(hex.EncodeToString(signer.PrimaryKey.Fingerprint[12:])); got != k.KeyID {
		t.Errorf("signed by %s, the answer names %s", got, k.KeyID)
	}
	code, zip := s.get(t, d.DownloadURL)
	if sum := sha256.Sum256(zip); code != http.StatusOK || hex.EncodeToString(sum[:]) != d.SHASum {
		t.Errorf("the zip at %s: %d, sha256 %x, want %s", d.DownloadURL, code, sum, d.SHASum)
	}
	// Served again from the cache: the same bytes, not a new signature.
	if _, again := s.get(t, d.SHASumsSignatureURL); !bytes.Equal(again, sig) {
		t.Error("the signature changed between two requests: it is not kept")
	}
	for _, p := range []string{regBase + "1.1.0/download/linux/amd64", regBase + "1.1.0/SHA256SUMS", regBase + "1.1.0/SHA256SUMS.sig"} {
		if code, body := s.get(t, p); code != http.StatusNotFound {
			t.Errorf("GET %s (unsigned version): %d %s, want 404", p, code, body)
		}
	}
}

// TestRegistryWarnModeUnsigned: a version a warn-mode rule lets through is served by the network
// mirror (as before) but the registry does not list or sign it: no cosign signature passed.
func TestRegistryWarnModeUnsigned(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true, "1.1.0": false})
	p := f.keyPolicy(t)
	p.Mode, p.Rules[0].Mode = sign.ModeWarn, sign.ModeWarn
	s := f.registryServer(t, p, 0)
	if got := indexVersions(t, s); len(got) != 2 {
		t.Fatalf("the mirror under a warn-mode policy lists %v, want both", got)
	}
	var vs registryVersions
	getJSON(t, s, regBase+"versions", &vs)
	if len(vs.Versions) != 1 || vs.Versions[0].Version != "1.0.0" {
		t.Fatalf("registry versions under a warn-mode policy: %+v, want 1.0.0 alone", vs)
	}
	code, body := s.get(t, regBase+"1.1.0/SHA256SUMS")
	if code != http.StatusNotFound || len(s.log.logLines(`"refused":"unsigned"`)) == 0 {
		t.Errorf("SHA256SUMS of the version let through unverified: %d %s; log:\n%s", code, body, s.log)
	}
	matches, _ := filepath.Glob(filepath.Join(s.cache.Dir, "registry-sums", "*", "*"))
	if len(matches) != 0 {
		t.Errorf("something was signed: %v", matches)
	}
	// The catalog says which protocol serves which version.
	s.cfg.CatalogRefresh = time.Hour
	cat := s.refreshCatalog(context.Background())
	if cat.Protocols.Registry != "/v1/providers/example.com/" || cat.Protocols.Mirror != "/" || cat.Protocols.RegistryKeyID == "" {
		t.Errorf("catalog protocols: %+v", cat.Protocols)
	}
	inRegistry := map[string]bool{}
	for _, v := range cat.Providers[0].Versions {
		inRegistry[v.Version] = v.Registry
	}
	if !inRegistry["1.0.0"] || inRegistry["1.1.0"] || len(inRegistry) != 2 {
		t.Errorf("catalog: in the registry %v, want 1.0.0 only of 1.0.0 and 1.1.0", inRegistry)
	}
	if _, page := s.get(t, "/"); !strings.Contains(string(page), "provider registry") || strings.Count(string(page), `class="registry"`) != 1 {
		t.Errorf("the catalog page does not show which version the registry serves:\n%s", page)
	}
}

// TestRegistryHostileNames: names that climb or are not names (in the hostname, namespace, type,
// version, OS or architecture) are refused before they become a repository, a cache key or a path,
// and nothing is signed for them.
func TestRegistryHostileNames(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true})
	s := f.registryServer(t, f.keyPolicy(t), 0)
	// Each is refused by the check of its part (the log says which), not by a lookup it reached.
	for _, c := range []struct{ path, why string }{
		{"/v1/providers/example.com/%2e%2e/hello/versions", `provider address`},
		{"/v1/providers/%2e%2e/acme/hello/versions", `provider address`},
		{"/v1/providers/example.com/acme/%2e%2e%2f%2e%2e%2fhello/versions", `provider address`},
		{"/v1/providers/exa%20mple.com/acme/hello/versions", `provider address`},
		{"/v1/providers/example.com/acme/hello%00/versions", `provider address`},
		{"/v1/providers/example.com/acme/hello/..%2f..%2f1.0.0/SHA256SUMS", `version \"`},
		{"/v1/providers/example.com/acme/hello/1.0.0%2f..%2f..%2f/SHA256SUMS", `version \"`},
		{"/v1/providers/example.com/acme/hello/v1.0.0/SHA256SUMS", `version \"`},
		{"/v1/providers/example.com/acme/hello/01.0.0/SHA256SUMS", `version \"`},
		{"/v1/providers/example.com/acme/hello/1.0.0/download/..%2f..%2flinux/amd64", `platform \"`},
		{"/v1/providers/example.com/acme/hello/1.0.0/download/linux/amd64%2f..", `platform \"`},
		{"/v1/providers/example.com/acme/hello/1.0.0/download/linux_amd64/x", `platform \"`},
		{"/v1/providers/example.com/acme/hello/1.0.0/download/LINUX/amd64", `platform \"`},
		{"/v1/providers/example.com/acme/hello/1.0.0/download/linux/%2e%2e", `platform \"`},
		{"/v1/providers/other.example/acme/hello/versions", `holds only`},
	} {
		code, body := s.get(t, c.path)
		if code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", c.path, code, body)
		}
		if l := s.log.logLines(`"id":"` + requestID(body) + `"`); len(l) != 1 || !strings.Contains(l[0], c.why) {
			t.Errorf("GET %s was not refused by the check of its name (%s): %v", c.path, c.why, l)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(s.cache.Dir, "registry-sums", "*", "*"))
	if len(matches) != 0 {
		t.Errorf("hostile requests signed something: %v", matches)
	}
	if code, _ := s.get(t, "/v1/providers/example.com/acme/hello/1.0.0/SHA256SUMS"); code != http.StatusOK {
		t.Errorf("the good request after them: %d", code)
	}
}

// TestRegistryManyVersions: a repository with more versions than the registry lists has only the
// newest checked and listed; the log says how many were left out.
func TestRegistryManyVersions(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true, "1.1.0": true, "1.2.0": true, "2.0.0": true})
	s := f.registryServer(t, f.keyPolicy(t), 2)
	var vs registryVersions
	getJSON(t, s, regBase+"versions", &vs)
	if len(vs.Versions) != 2 || vs.Versions[0].Version != "2.0.0" || vs.Versions[1].Version != "1.2.0" {
		t.Fatalf("versions over the bound: %+v, want 2.0.0 and 1.2.0", vs)
	}
	if len(s.log.logLines(`"versions_left_out":2`)) != 1 {
		t.Errorf("the log does not say two versions were left out:\n%s", s.log)
	}
}

// TestRegistryPathLimits: the hostile-client bounds hold on the registry's routes (a path over the
// limit gets 414 before it is parsed; a GET with a body is refused).
func TestRegistryPathLimits(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true})
	s := f.registryServer(t, f.keyPolicy(t), 0)
	long := regBase + strings.Repeat("1", 9000) + "/SHA256SUMS"
	if code, _ := s.get(t, long); code != http.StatusRequestURITooLong {
		t.Errorf("a %d-byte path: %d, want 414", len(long), code)
	}
	if got := route(regBase + "versions"); got != "registry_versions" {
		t.Errorf("route of versions: %s", got)
	}
	if got := route(regBase + "1.0.0/download/linux/amd64"); got != "registry_download" {
		t.Errorf("route of download: %s", got)
	}
}

// TestLoadSigner: a key protected by a passphrase, a public key, and what is not a key are refused
// with the cause and the fix.
func TestLoadSigner(t *testing.T) {
	enc, _ := testSigningKey(t, "secret")
	if _, err := LoadSigner(enc); err == nil || !strings.Contains(err.Error(), "passphrase") {
		t.Errorf("an encrypted key: %v", err)
	}
	good, e := testSigningKey(t, "")
	s, err := LoadSigner(good)
	if err != nil {
		t.Fatal(err)
	}
	if s.Warning == "" || !strings.Contains(s.Warning, "Terraform") {
		t.Errorf("an EdDSA key gives no warning that Terraform cannot read it: %q", s.Warning)
	}
	if len(s.KeyID) != 16 || !strings.HasSuffix(strings.ToUpper(hex.EncodeToString(e.PrimaryKey.Fingerprint)), s.KeyID) {
		t.Errorf("key ID %s", s.KeyID)
	}
	pub := filepath.Join(t.TempDir(), "pub.asc")
	os.WriteFile(pub, []byte(s.PublicKey()), 0o600)
	if _, err := LoadSigner(pub); err == nil || !strings.Contains(err.Error(), "public key") {
		t.Errorf("a public key: %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	os.WriteFile(junk, []byte("not a key"), 0o600)
	if _, err := LoadSigner(junk); err == nil || !strings.Contains(err.Error(), "armored") {
		t.Errorf("junk: %v", err)
	}
}

// TestRegistrySumsLinkInCache: a link planted in the cache where the registry keeps its signed
// SHA256SUMS leads no write (nor read) outside the cache: the request fails instead.
func TestRegistrySumsLinkInCache(t *testing.T) {
	f := newLayout(t, map[string]bool{"1.0.0": true})
	s := f.registryServer(t, f.keyPolicy(t), 0)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(s.cache.Dir, "registry-sums")); err != nil {
		t.Fatal(err)
	}
	code, body := s.get(t, regBase+"1.0.0/SHA256SUMS")
	if code == http.StatusOK {
		t.Errorf("SHA256SUMS through a link out of the cache: %d %s", code, body)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the registry wrote outside the cache, through the link: %v", entries)
	}
}

// TestCLIConfigHostBlocks: with a provider registry, the printed configuration has one host block
// per hostname naming every service serve answers for it (providers.v1 and modules.v1 merged), and
// no provider_installation block; without one, the network mirror block as before.
func TestCLIConfigHostBlocks(t *testing.T) {
	got := CLIConfigFor("https://serve.example:8443/", true, []string{"registry.opentofu.org/hashicorp/null"},
		[]string{"registry.opentofu.org"}, []string{"registry.opentofu.org", "localhost:5000"})
	if strings.Count(got, `host "registry.opentofu.org"`) != 1 || strings.Count(got, `host "localhost:5000"`) != 1 ||
		!strings.Contains(got, `"providers.v1" = "https://serve.example:8443/v1/providers/registry.opentofu.org/"`) ||
		!strings.Contains(got, `"modules.v1"   = "https://serve.example:8443/modules/v1/registry.opentofu.org/"`) ||
		!strings.Contains(got, `"providers.v1" = "https://serve.example:8443/v1/providers/localhost:5000/"`) ||
		strings.Contains(got, "provider_installation") {
		t.Errorf("with the registry:\n%s", got)
	}
	if got := CLIConfigFor("https://serve.example:8443/", true, nil, nil, nil); !strings.Contains(got, "network_mirror") || strings.Contains(got, "host ") {
		t.Errorf("without the registry:\n%s", got)
	}
}
