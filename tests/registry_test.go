package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testca"
	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// gpgSigningKey makes an OpenPGP key without a passphrase with the stock gpg, in a home of its
// own, as docs/serve.md says, and gives the armored secret key's path and the key's ID.
func gpgSigningKey(t testing.TB) (string, string) {
	t.Helper()
	gpg, err := exec.LookPath("gpg")
	if err != nil {
		peers.Missing(t, "gpg")
	}
	home := filepath.Join(t.TempDir(), "gnupg")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		cmd := exec.Command(gpg, append([]string{"--batch", "--homedir", home}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	// RSA: Terraform 1.5.7 reads no EdDSA key ("unsupported feature: public key type: 22").
	run("--passphrase", "", "--quick-gen-key", "Example Org Providers <providers@example.com>", "rsa3072", "sign", "never")
	key := filepath.Join(t.TempDir(), "signing-key.asc")
	writeFile(t, key, string(run("--armor", "--export-secret-keys")))
	var id string
	for _, l := range strings.Split(string(run("--with-colons", "--list-keys")), "\n") {
		if f := strings.Split(l, ":"); f[0] == "pub" && len(f) > 4 {
			id = f[4]
		}
	}
	if len(id) != 16 {
		t.Fatalf("gpg lists no key ID")
	}
	return key, id
}

// registryServe is a serve answering providers.v1 on localhost:PORT (a hostname the local CA is
// valid for), and where its cache is.
type registryServe struct {
	*served
	host  string
	cache string
	keyID string
}

// TestServeRegistryClients: a provider pushed to a registry and signed with the stock cosign CLI is
// installed by plain `tofu init` and `terraform init` from serve's Provider Registry Protocol, with
// only serve's CA trusted and no CLI configuration: each client checks serve's OpenPGP signature
// itself and says so with the key's ID, and the lock records zh: and h1:. A version pushed unsigned
// is not listed. A SHA256SUMS or signature changed in serve's cache is refused by each client.
func TestServeRegistryClients(t *testing.T) {
	clients := map[string]string{"tofu": peers.Require(t, "tofu"), "terraform": peers.Require(t, "terraform")}
	reg := testreg.Start(t, testreg.Options{})
	keys := t.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	const repo = "providers/acme/hello"
	signed := versionedHello(t, reg, repo, "1.0.0")
	if out, err := cosignCLI(t, reg, keys, append(cosignSignDefault, reg.Host+"/"+repo+"@"+signed)...); err != nil {
		t.Fatalf("cosign sign: %v\n%s", err, out)
	}
	versionedHello(t, reg, repo, "1.1.0") // not signed: "~> 1.0" would choose it if it were listed

	signingKey, keyID := gpgSigningKey(t)
	port := freePort(t)
	rs := &registryServe{host: fmt.Sprintf("localhost:%d", port), cache: filepath.Join(t.TempDir(), "cache"), keyID: keyID}
	rs.served = startServe(t, nil, false, reg.Host+"/providers/${namespace}/${type}", "--ca-file", reg.CAFile, "--cache-dir", rs.cache,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--url", "https://"+rs.host+"/",
		"--key", filepath.Join(keys, "cosign.pub"), "--signing-key", signingKey)
	var info struct {
		RegistryURL  string `json:"registry_url"`
		SigningKeyID string `json:"signing_key_id"`
	}
	code, _, body := rs.get(t, "/.well-known/terraform.json")
	json.Unmarshal(body, &info)
	if code != 200 || !strings.Contains(string(body), `"providers.v1":"/v1/providers/`+rs.host+`/"`) {
		t.Fatalf("service discovery: %d %s", code, body)
	}
	code, _, body = rs.get(t, "/v1/providers/"+rs.host+"/acme/hello/versions")
	if code != 200 || !strings.Contains(string(body), `"1.0.0"`) || strings.Contains(string(body), "1.1.0") {
		t.Fatalf("versions: %d %s, want 1.0.0 and not the unsigned 1.1.0", code, body)
	}
	for name, bin := range clients {
		t.Run(name, func(t *testing.T) {
			cfg := rs.install(t, bin, name == "tofu", true)
			hashes := lockHashes(t, filepath.Join(cfg, ".terraform.lock.hcl"), rs.host+"/acme/hello")
			p := helloHashes["linux_amd64"]
			if !contains(hashes, p.ZH) || !contains(hashes, p.H1) {
				t.Errorf("the lock's hashes %v lack %s or %s", hashes, p.ZH, p.H1)
			}
			lock, _ := os.ReadFile(filepath.Join(cfg, ".terraform.lock.hcl"))
			if !strings.Contains(string(lock), `version     = "1.0.0"`) {
				t.Errorf("the lock chose another version than the signed one:\n%s", lock)
			}
			mustTofu(t, bin, cfg, rs.env(cfg), "apply", "-auto-approve", "-input=false")
			rs.tampered(t, bin, name == "tofu")
		})
	}
}

func (rs *registryServe) env(work string) []string {
	return []string{"SSL_CERT_FILE=" + rs.CAFile, "HOME=" + work}
}

// install runs a plain init of helloConfig with its source on serve's hostname, and checks that the
// client said the provider is signed with the key's ID (want) or failed on the signature (!want).
func (rs *registryServe) install(t *testing.T, bin string, tofu, want bool) string {
	t.Helper()
	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "main.tf"), strings.Replace(helloConfig, `"example.com/acme/hello"`, `"`+rs.host+`/acme/hello"`, 1))
	out, err := tofuRun(t, bin, cfg, append(rs.env(cfg), "NO_COLOR=1"), "init", "-input=false", "-no-color")
	said := "signed, key ID " + rs.keyID
	if !tofu {
		said = "self-signed, key ID " + rs.keyID
	}
	switch {
	case want && (err != nil || !strings.Contains(out, said)):
		t.Fatalf("%s init: %v; want it installed with %q:\n%s", filepath.Base(bin), err, said, out)
	case !want && err == nil:
		t.Fatalf("%s init installed from a tampered registry:\n%s", filepath.Base(bin), out)
	case !want && !strings.Contains(strings.ToLower(out), "signature"):
		t.Errorf("%s init failed, but not on the signature:\n%s", filepath.Base(bin), out)
	}
	return cfg
}

// tampered changes serve's cached SHA256SUMS, then its signature, and checks that the client
// refuses each; with both put back, it installs again.
func (rs *registryServe) tampered(t *testing.T, bin string, tofu bool) {
	t.Helper()
	sums, _ := filepath.Glob(filepath.Join(rs.cache, "registry-sums", "*", "*", "SHA256SUMS"))
	if len(sums) != 1 {
		t.Fatalf("want one signed SHA256SUMS in serve's cache, found %v", sums)
	}
	for _, path := range []string{sums[0], sums[0] + ".sig"} {
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		changed := bytes.Clone(orig)
		if strings.HasSuffix(path, ".sig") {
			changed[len(changed)-3] ^= 0x01
		} else {
			// Every line the client compares stays as it was: only the signature can tell.
			changed = append(changed, []byte(strings.Repeat("0", 64)+"  terraform-provider-hello_1.0.0_plan9_amd64.zip\n")...)
		}
		writeFile(t, path, string(changed))
		rs.install(t, bin, tofu, false)
		writeFile(t, path, string(orig))
	}
	rs.install(t, bin, tofu, true)
}

// freePort gives a port free on 127.0.0.1 now, for a server that must know its URL (and so its
// port) before it listens.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestServeRegistryAcrossAirGap: a configuration needing a cosign-signed provider (example.com,
// from an OCI registry) and an origin registry's provider (its SHA256SUMS signed with the origin's
// OpenPGP key) is bundled with save --config; every server stops; the bundle loads into an OCI
// layout; serve answers for both original addresses from it, with the host blocks it prints as the
// only CLI configuration. Plain tofu and terraform init (and apply) of the unchanged .tf files
// install both: the OCI one checked against serve's key, the origin one against the origin's own
// key, which serve passes on unchanged.
func TestServeRegistryAcrossAirGap(t *testing.T) {
	clients := map[string]string{"tofu": peers.Require(t, "tofu"), "terraform": peers.Require(t, "terraform")}
	f := newAirGapFixture(t)
	// A registry module (two versions) that requires the origin's provider, on a module registry
	// of its own, called from the root with a version constraint.
	mca := testca.NewCA(t, t.TempDir())
	appendCA(t, envValue(f.env, "SSL_CERT_FILE"), mca.File)
	mods := startModuleServers(t, mca)
	for _, v := range []string{"1.0.0", "1.1.0"} {
		mods.put(t, "/archives/vpc-"+v+".tar.gz", map[string]string{"main.tf": "terraform {\n  required_providers {\n    hello = {\n      source = \"" + f.org.Address() + "\"\n    }\n  }\n}\n\noutput \"version\" {\n  value = \"" + v + "\"\n}\n"})
	}
	mainTF := readFile(t, filepath.Join(f.cfg, "main.tf"))
	writeFile(t, filepath.Join(f.cfg, "main.tf"), mainTF+"\nmodule \"vpc\" {\n  source  = \""+mods.host()+"/acme/vpc/aws\"\n  version = \"~> 1.0\"\n}\n\noutput \"vpc\" {\n  value = module.vpc.version\n}\n")
	mustOprov(t, f.env, "lock", "-C", f.cfg)
	tarball := filepath.Join(t.TempDir(), "deps.tar")
	f.save(t, tarball)
	f.connected.Stop()
	f.org.Stop()
	mods.reg.Close()
	mods.git.Close()

	originFpr := fmt.Sprintf("%X", f.org.Key.PrimaryKey.Fingerprint)
	originID := fmt.Sprintf("%016X", f.org.Key.PrimaryKey.KeyId)
	policy := filepath.Join(t.TempDir(), "policy.hcl")
	writeFile(t, policy, fmt.Sprintf("trust \"acme\" {\n  providers = [\"example.com/acme/*\"]\n  keys      = [%q]\n}\ntrust \"origin\" {\n  providers   = [%q]\n  origin_keys = [%q]\n}\n",
		f.pub, f.org.Address(), originFpr))
	layout := filepath.Join(t.TempDir(), "airgap")
	r := mustOprov(t, f.env, "load", tarball, "--to", "oci-layout:"+layout, "--policy", policy, "-o", "json")
	var loaded struct {
		ServeModules [][]string `json:"serve_modules"`
	}
	decodeJSON(t, r.Stdout, &loaded)
	if len(loaded.ServeModules) != 1 {
		t.Fatalf("load printed serve arguments for %d module hostnames, want 1: %s", len(loaded.ServeModules), r.Stdout)
	}
	// Registry modules carry no signature: serve lists them under a warn-mode rule of their own.
	servePolicy := filepath.Join(t.TempDir(), "serve-policy.hcl")
	writeFile(t, servePolicy, readFile(t, policy)+fmt.Sprintf("trust \"modules\" {\n  repositories = [\"**\"]\n  keys         = [%q]\n  mode         = \"warn\"\n}\n", f.pub))

	signingKey, keyID := gpgSigningKey(t)
	s := startServe(t, nil, false, append([]string{"oci-layout:" + layout + "/${hostname}/${namespace}/${type}", "--cache-dir", filepath.Join(t.TempDir(), "cache"),
		"--include", "example.com/acme/hello", "--include", f.org.Address(), "--policy", servePolicy, "--signing-key", signingKey}, loaded.ServeModules[0]...)...)
	for _, h := range []string{"example.com", f.org.Host} {
		if !strings.Contains(s.CLIConfig, `host "`+h+`"`) || !strings.Contains(s.CLIConfig, s.URL+"v1/providers/"+h+"/") {
			t.Fatalf("the printed CLI configuration has no host block for %s naming serve's providers.v1:\n%s", h, s.CLIConfig)
		}
	}
	if !strings.Contains(s.CLIConfig, `host "`+mods.host()+`"`) || !strings.Contains(s.CLIConfig, s.URL+"modules/v1/"+mods.host()+"/") {
		t.Fatalf("the printed CLI configuration has no host block for the module registry %s:\n%s", mods.host(), s.CLIConfig)
	}
	if strings.Contains(s.CLIConfig, "provider_installation") {
		t.Errorf("the printed CLI configuration routes providers elsewhere than the registry:\n%s", s.CLIConfig)
	}
	// Control: with another key in origin_keys, the origin's provider is not listed (nor signed
	// for by serve's key); the OCI one still is.
	other := filepath.Join(t.TempDir(), "other.hcl")
	writeFile(t, other, strings.Replace(readFile(t, policy), originFpr, fmt.Sprintf("%X", origin.NewKey(t, "not the origin").PrimaryKey.Fingerprint), 1))
	wrong := startServe(t, nil, false, "oci-layout:"+layout+"/${hostname}/${namespace}/${type}", "--cache-dir", filepath.Join(t.TempDir(), "cache"),
		"--include", "example.com/acme/hello", "--include", f.org.Address(), "--policy", other, "--signing-key", signingKey)
	for addr, want := range map[string]bool{"example.com/acme/hello": true, f.org.Address(): false} {
		code, _, body := wrong.get(t, "/v1/providers/"+addr+"/versions")
		if code != 200 || strings.Contains(string(body), `"1.0.0"`) != want {
			t.Errorf("with another origin key, versions of %s: %d %s (want 1.0.0 listed: %v)", addr, code, body, want)
		}
	}
	for name, bin := range clients {
		t.Run(name, func(t *testing.T) {
			work := t.TempDir()
			rc := filepath.Join(work, "serve.tfrc")
			writeFile(t, rc, s.CLIConfig)
			cfg := filepath.Join(work, "cfg")
			copyDir(t, f.cfg, cfg)
			os.Remove(filepath.Join(cfg, "oprov.hcl")) // not read by the clients; gone to show it
			os.RemoveAll(filepath.Join(cfg, ".terraform"))
			env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work}
			out := mustTofu(t, bin, cfg, append(env, "NO_COLOR=1"), "init", "-input=false", "-no-color")
			t.Logf("%s init:\n%s", name, out)
			if !strings.Contains(out, "Downloading "+mods.host()+"/acme/vpc/aws 1.1.0") {
				t.Errorf("%s init did not download the registry module through serve:\n%s", name, out)
			}
			for _, want := range []string{"example.com/acme/hello v1.0.0 (", "signed, key ID " + keyID + ")", f.org.Address() + " v1.0.0 (", "signed, key ID " + originID + ")"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s init does not say %q:\n%s", name, want, out)
				}
			}
			for _, addr := range []string{"example.com/acme/hello", f.org.Address()} {
				hashes := lockHashes(t, filepath.Join(cfg, ".terraform.lock.hcl"), addr)
				if !contains(hashes, helloHashes["linux_amd64"].H1) || !contains(hashes, helloHashes["linux_amd64"].ZH) {
					t.Errorf("the lock's hashes for %s: %v", addr, hashes)
				}
			}
			mustTofu(t, bin, cfg, env, "apply", "-auto-approve", "-input=false")
			var outputs map[string]struct{ Value string }
			tofuJSON(t, bin, cfg, env, &outputs, "output", "-json")
			if outputs["vpc"].Value != "1.1.0" {
				t.Errorf("the registry module's output: %+v, want version 1.1.0", outputs)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestServeRegistryOnHostname: the registry on a hostname without a port, as an organisation runs
// it: in a network namespace of the test's own, whose hosts file maps registry.test to 127.0.0.1,
// serve listens on port 443 with its local CA (valid for the --url host). Plain tofu and terraform
// init of a configuration whose source is registry.test/acme/hello, with only that CA trusted and
// no CLI configuration, install the provider and say it is signed, with the key's ID.
func TestServeRegistryOnHostname(t *testing.T) {
	tofu, terraform := peers.Require(t, "tofu"), peers.Require(t, "terraform")
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace (unshare -n) and a hosts file of its own")
	}
	for _, tool := range []string{"unshare", "ip", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	pass := []string{"COSIGN_PASSWORD=test-password"}
	mustOprov(t, pass, "keygen", "--output-key-prefix", filepath.Join(dir, "cosign"))
	layout := "oci-layout:" + filepath.Join(dir, "layout")
	mustOprov(t, pass, "push", helloRelease(t), layout, "--address", "registry.test/acme/hello", "--sign", "--key", filepath.Join(dir, "cosign.key"))
	signingKey, keyID := gpgSigningKey(t)
	hosts := filepath.Join(dir, "hosts")
	writeFile(t, hosts, "127.0.0.1 localhost\n127.0.0.1 registry.test\n")
	cfgs := map[string]string{}
	for _, name := range []string{"tofu", "terraform"} {
		cfgs[name] = filepath.Join(dir, "cfg-"+name)
		writeFile(t, filepath.Join(cfgs[name], "main.tf"), strings.Replace(helloConfig, `"example.com/acme/hello"`, `"registry.test/acme/hello"`, 1))
	}
	state := filepath.Join(dir, "state")
	script := `set -eu
ip link set lo up
mount --bind "$HOSTS" /etc/hosts
"$OPROV" serve "$LAYOUT" --address registry.test/acme/hello --key "$DIR/cosign.pub" --signing-key "$SIGNING_KEY" \
  --listen 127.0.0.1:443 --url https://registry.test/ --state-dir "$STATE" --cache-dir "$DIR/cache" -o json > "$DIR/serve.json" 2> "$DIR/serve.log" &
for i in $(seq 300); do grep -q cli_config "$DIR/serve.json" 2>/dev/null && break; sleep 0.1; done
export SSL_CERT_FILE="$STATE/ca.pem" HOME="$DIR" TF_CLI_CONFIG_FILE= TF_PLUGIN_CACHE_DIR= TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1 NO_COLOR=1
(cd "$CFG_TOFU" && "$TOFU" init -input=false -no-color)
echo "=== terraform"
(cd "$CFG_TERRAFORM" && "$TERRAFORM" init -input=false -no-color)
kill %1
`
	cmd := exec.Command("unshare", "--net", "--mount", "bash", "-c", script)
	cmd.Env = append(os.Environ(), "HOSTS="+hosts, "OPROV="+oprovBin, "LAYOUT="+layout, "DIR="+dir, "SIGNING_KEY="+signingKey, "STATE="+state,
		"CFG_TOFU="+cfgs["tofu"], "CFG_TERRAFORM="+cfgs["terraform"], "TOFU="+tofu, "TERRAFORM="+terraform)
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
		t.Fatalf("in the namespace: %v\n%s\nserve's log:\n%s", err, out, log)
	}
	tofuOut, tfOut, _ := strings.Cut(string(out), "=== terraform")
	for name, want := range map[string][2]string{"tofu": {tofuOut, "signed, key ID " + keyID}, "terraform": {tfOut, "self-signed, key ID " + keyID}} {
		if !strings.Contains(want[0], "Installed registry.test/acme/hello v1.0.0 ("+want[1]+")") {
			t.Errorf("%s init on registry.test:\n%s", name, want[0])
		}
		if hashes := lockHashes(t, filepath.Join(cfgs[name], ".terraform.lock.hcl"), "registry.test/acme/hello"); !contains(hashes, helloHashes["linux_amd64"].H1) || !contains(hashes, helloHashes["linux_amd64"].ZH) {
			t.Errorf("%s lock: %v", name, hashes)
		}
	}
	if data, _ := os.ReadFile("/etc/hosts"); strings.Contains(string(data), "registry.test") {
		t.Errorf("the namespace's hosts file leaked into this one's")
	}
}
