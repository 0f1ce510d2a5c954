package tests

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oprov/oprov/tests/testkit/doccheck"
	"github.com/oprov/oprov/tests/testkit/peers"
)

var (
	cloudOnce sync.Once
	cloudDir  string
	cloudErr  error
)

// cloudRelease packages tests/providers/cloud (the stand-in cloud provider, registry.example.com/acme/aws)
// for this machine, once per test run.
func cloudRelease(t testing.TB) string {
	t.Helper()
	cloudOnce.Do(func() {
		if cloudDir, cloudErr = os.MkdirTemp("", "oprov-cloud-dist-"); cloudErr != nil {
			return
		}
		r := oprov(t, nil, "package", "--go", filepath.Join(repoRoot, "tests", "providers", "cloud"), "--version", "1.0.0",
			"--platform", runtime.GOOS+"_"+runtime.GOARCH, "--out-dir", cloudDir)
		if r.Code != 0 {
			cloudErr = fmt.Errorf("oprov package tests/providers/cloud: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
	if cloudErr != nil {
		t.Fatal(cloudErr)
	}
	return cloudDir
}

// cloudConfig reads every credential place of the stand-in provider and says what it found.
const cloudConfig = `terraform {
  required_providers {
    aws = {
      source  = "registry.example.com/acme/aws"
      version = "~> 1.0"
    }
  }
}

data "aws_caller" "me" {}

output "region" { value = data.aws_caller.me.region }
output "metadata" { value = data.aws_caller.me.metadata }
output "credentials" { value = data.aws_caller.me.credentials }
output "missing" { value = data.aws_caller.me.missing }
`

// The near side's registry configuration: hello and the stand-in cloud provider, signed with the
// fixture's key.
const farNearHCL = oprovHCL + `
oci_mirror {
  repository_template = "%HOST%/providers/${namespace}/${type}"
  include             = ["registry.example.com/acme/*"]
  public_keys         = ["%KEYS%/cosign.pub"]
}
`

// farConfigWorld is a far side configured by its operator: a private directory of the far
// account holding the configuration, the operator's copy of the signing key and the registry's
// CA; the far account's ~/.aws/credentials; an instance metadata stand-in on a port of
// 127.0.0.1; and the near side's configuration, locked, whose HOME and environment hold
// credentials of their own that must never reach the provider.
type farConfigWorld struct {
	far                      *sshFarSide
	f                        *loaderFixture
	env                      []string
	farDir, nearHome         string
	metadataPort             int
	tofu                     string
	farSecret, nearSecret    string
	farRegion, metadataReply string
}

func newFarConfigWorld(t *testing.T) *farConfigWorld {
	t.Helper()
	w := &farConfigWorld{far: farSide(t), tofu: peers.Require(t, "tofu"),
		farSecret: "aws_secret_access_key = FAR-SECRET", nearSecret: "aws_secret_access_key = NEAR-SECRET",
		farRegion: "far-region-1", metadataReply: "far-instance-role"}
	w.f = newLoaderFixture(t, cloudConfig)
	pushJSON(t, w.f.env, cloudRelease(t), w.f.reg.Host+"/providers/acme/aws", "--address", "registry.example.com/acme/aws",
		"--sign", "--key", filepath.Join(w.f.keys, "cosign.key"))
	w.nearHome = envValue(w.f.env, "HOME")
	writeFile(t, filepath.Join(w.nearHome, ".aws", "credentials"), w.nearSecret+"\n")
	w.env = append(w.f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "AWS_REGION=near-region-1")

	// The far side's files, owned by the far account.
	var err error
	if w.farDir, err = os.MkdirTemp(w.far.home, "farcfg-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(w.farDir); os.RemoveAll(filepath.Join(w.far.home, ".aws")) })
	for src, dst := range map[string]string{filepath.Join(w.f.keys, "cosign.pub"): "acme.pub", w.f.reg.CAFile: "ca.pem"} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(w.farDir, dst), string(data))
	}
	writeFile(t, filepath.Join(w.far.home, ".aws", "credentials"), "[default]\n"+w.farSecret+"\n")
	if err := runCmd("chown", "-R", remoteUser+":", w.farDir, filepath.Join(w.far.home, ".aws")); err != nil {
		t.Fatal(err)
	}

	// The instance metadata stand-in, on a port of its own.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.metadataPort = l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/latest/meta-data/iam/security-credentials/" {
			http.NotFound(rw, r)
			return
		}
		fmt.Fprintln(rw, w.metadataReply)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return w
}

// hostConfig writes a far configuration file into the far side's directory.
func (w *farConfigWorld) hostConfig(t *testing.T, name, hcl string) string {
	t.Helper()
	p := filepath.Join(w.farDir, name)
	writeFile(t, p, hcl)
	if err := runCmd("chown", remoteUser+":", p); err != nil {
		t.Fatal(err)
	}
	return p
}

// forced pins a new key to the far account's forced command: the environment the far operator
// gives the provider (the AWS_* variables, and the test registry's CA for the far side's own
// check of the release) and 'oprov provider host' with hostArgs. It gives the near side's
// command: ssh with that key and no command of its own.
func (w *farConfigWorld) forced(t *testing.T, hostArgs ...string) []string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "id")
	if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key); err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	command := strings.Join(append([]string{"env", "SSL_CERT_FILE=" + filepath.Join(w.farDir, "ca.pem"),
		"AWS_REGION=" + w.farRegion, "AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:" + strconv.Itoa(w.metadataPort) + "/",
		w.far.oprov, "provider", "host", "--stdio"}, hostArgs...), " ")
	line := `restrict,command="` + command + `" ` + strings.TrimSpace(string(pub)) + "\n"
	authorized := filepath.Join(w.far.home, ".ssh", "authorized_keys")
	editAuthorized(t, authorized, func(s string) string { return s + line })
	t.Cleanup(func() {
		editAuthorized(t, authorized, func(s string) string { return strings.Replace(s, line, "", 1) })
	})
	return []string{"ssh", "-T", "-i", key, "-p", strconv.Itoa(w.far.port), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + w.far.knownHosts, remoteUser + "@127.0.0.1"}
}

var authorizedMu sync.Mutex

func editAuthorized(t *testing.T, path string, edit func(string) string) {
	authorizedMu.Lock()
	defer authorizedMu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(string(data))), 0o600); err != nil {
		t.Fatal(err)
	}
}

// remoteBlockFor is a remote block of the near side for label, running command.
func remoteBlockFor(label string, command []string) string {
	var quoted []string
	for _, a := range command {
		quoted = append(quoted, strconv.Quote(a))
	}
	return "remote " + strconv.Quote(label) + " {\n  command = [" + strings.Join(quoted, ", ") + "]\n}\n"
}

// apply writes the near side's oprov.hcl (the registry, then extra) and applies the stand-in
// cloud configuration through oprov run; on success it gives the outputs.
func (w *farConfigWorld) apply(t *testing.T, extra string) (result, map[string]string) {
	t.Helper()
	writeFile(t, filepath.Join(w.f.cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", w.f.reg.Host, "%KEYS%", w.f.keys).Replace(farNearHCL)+extra)
	if _, err := os.Stat(filepath.Join(w.f.cfg, ".terraform.lock.hcl")); err != nil {
		mustOprov(t, w.env, "lock", "-C", w.f.cfg)
	}
	r := oprov(t, w.env, "run", "-C", w.f.cfg, "--", w.tofu, "apply", "-auto-approve", "-input=false")
	if r.Code != 0 {
		return r, nil
	}
	var outs map[string]struct{ Value string }
	out := mustOprov(t, w.env, "run", "-C", w.f.cfg, "--", w.tofu, "output", "-json").Stdout
	// tofu may warn before the JSON (a CLI configuration file it did not find).
	if i := strings.Index(out, "\n{\n"); i >= 0 && !strings.HasPrefix(out, "{") {
		out = out[i+1:]
	}
	decodeJSON(t, out, &outs)
	got := map[string]string{}
	for k, v := range outs {
		got[k] = v.Value
	}
	return r, got
}

// docCloudRecipe is docs/remote.md's far configuration for a cloud provider, the block marked
// <!-- doctest remote: far configuration -->, with the registry, the operator's key and the metadata port of this
// test in place of the page's; each replaced text must be in the page.
func (w *farConfigWorld) docCloudRecipe(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "remote.md"))
	if err != nil {
		t.Fatal(err)
	}
	var recipe string
	for _, b := range doccheck.Parse(string(data)).Blocks {
		if b.Lang == "hcl" && b.Marker == "doctest remote: far configuration" && strings.Contains(b.Text, `sandbox "registry.example.com/acme/aws"`) {
			recipe = b.Text
		}
	}
	if recipe == "" {
		t.Fatal(`docs/remote.md has no hcl block marked <!-- doctest remote: far configuration --> with sandbox "registry.example.com/acme/aws"`)
	}
	for _, r := range [][2]string{
		{"registry.example.com/providers/", w.f.reg.Host + "/providers/"},
		{"/etc/oprov/acme.pub", filepath.Join(w.farDir, "acme.pub")},
		{"connect = [80, 443]", "connect = [" + strconv.Itoa(w.metadataPort) + ", 443]"},
	} {
		if !strings.Contains(recipe, r[0]) {
			t.Fatalf("docs/remote.md's cloud recipe no longer says %q:\n%s", r[0], recipe)
		}
		recipe = strings.Replace(recipe, r[0], r[1], 1)
	}
	return recipe
}

// TestRemoteFarConfiguration: the far operator's configuration (a forced command running
// 'oprov provider host --stdio --config FILE' through a real sshd) decides what a provider gets
// there. docs/remote.md's cloud recipe gives the stand-in cloud provider all three of its
// credentials (an AWS_* variable, the metadata port, ~/.aws/credentials) and nothing of the near
// side's; a near block may narrow it (its ~ is the far home) and is refused past it, naming the
// far FILE:LINE; a provider the configuration does not allow is refused; without the
// configuration, or with another port, the provider sees nothing (fails closed).
func TestRemoteFarConfiguration(t *testing.T) {
	w := newFarConfigWorld(t)
	recipe := w.hostConfig(t, "host.hcl", w.docCloudRecipe(t))
	sandboxLine := 0
	for i, l := range strings.Split(w.docCloudRecipe(t), "\n") {
		if strings.HasPrefix(l, "sandbox ") {
			sandboxLine = i + 1
		}
	}
	farAt := recipe + ":" + strconv.Itoa(sandboxLine)
	withRecipe := remoteBlockFor("registry.example.com/acme/aws", w.forced(t, "--config", recipe, "--require-sandbox"))

	t.Run("the recipe gives all three", func(t *testing.T) {
		r, got := w.apply(t, withRecipe)
		if r.Code != 0 {
			t.Fatalf("apply through the far configuration: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		want := map[string]string{"region": w.farRegion, "metadata": w.metadataReply, "credentials": "[default]\n" + w.farSecret, "missing": ""}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %q, want %q (everything the provider saw: %q)", k, got[k], v, got)
			}
		}
	})

	t.Run("a near block narrows it; its ~ is the far home", func(t *testing.T) {
		r, got := w.apply(t, withRecipe+`sandbox "registry.example.com/acme/aws" {
  read = ["~/.aws"]
  env  = ["AWS_REGION"]
}
`)
		if r.Code != 0 {
			t.Fatalf("apply with a narrowing near block: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		if got["credentials"] != "[default]\n"+w.farSecret || strings.Contains(got["credentials"], "NEAR") {
			t.Errorf("~/.aws/credentials is not the far account's: %q", got)
		}
		if got["region"] != w.farRegion || got["metadata"] != "" || !strings.Contains(got["missing"], "AWS_EC2_METADATA_SERVICE_ENDPOINT") {
			t.Errorf("env narrowed to AWS_REGION: want the region and no metadata endpoint, got %q", got)
		}
	})

	for name, block := range map[string]string{
		"a wider read":              `read = ["/"]`,
		"the near home, absolute":   `read = [` + strconv.Quote(filepath.Join(w.nearHome, ".aws")) + `]`,
		"a variable not allowed":    `env = ["GITHUB_TOKEN"]`,
		"a prefix wider than AWS_*": `env = ["AW*"]`,
		"another port":              `connect = [22]`,
		"best_effort":               `best_effort = true`,
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			r, _ := w.apply(t, withRecipe+"sandbox \"registry.example.com/acme/aws\" {\n  "+block+"\n}\n")
			if r.Code == 0 {
				t.Fatalf("a near block asking %s ran:\n%s", block, r.Stdout)
			}
			for _, want := range []string{"beyond the far side's sandbox", farAt, `remote "registry.example.com/acme/aws" (ssh)`} {
				if !strings.Contains(r.Stderr, want) {
					t.Errorf("the refusal of %s lacks %q:\n%s", block, want, r.Stderr)
				}
			}
		})
	}

	// A link below the far block's path that leads out of it (as an earlier provider allowed to
	// write there could make): the sandbox would grant where it leads, the far account's ~/.ssh.
	t.Run("refused: a link out of the far path", func(t *testing.T) {
		link := filepath.Join(w.far.home, ".aws", "esc")
		if err := os.Symlink(filepath.Join(w.far.home, ".ssh"), link); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(link)
		if err := runCmd("chown", "-h", remoteUser+":", link); err != nil {
			t.Fatal(err)
		}
		r, _ := w.apply(t, withRecipe+"sandbox \"registry.example.com/acme/aws\" {\n  read = [\"~/.aws/esc\"]\n}\n")
		if r.Code == 0 {
			t.Fatalf("a near block asking read = [\"~/.aws/esc\"], a link to ~/.ssh, ran:\n%s", r.Stdout)
		}
		for _, want := range []string{"beyond the far side's sandbox", farAt, "it leads to " + filepath.Join(w.far.home, ".ssh")} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("the refusal lacks %q:\n%s", want, r.Stderr)
			}
		}
	})

	t.Run("refused: a provider the configuration does not allow", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "main.tf"), strings.Replace(remoteHelloConfig, `greeting_file = "greeting"`, "", 1))
		writeFile(t, filepath.Join(dir, "oprov.hcl"), strings.NewReplacer("%HOST%", w.f.reg.Host, "%KEYS%", w.f.keys).Replace(farNearHCL)+
			remoteBlockFor("example.com/acme/hello", w.forced(t, "--config", recipe, "--require-sandbox")))
		mustOprov(t, w.env, "lock", "-C", dir)
		r := oprov(t, w.env, "run", "-C", dir, "--", w.tofu, "apply", "-auto-approve", "-input=false")
		if r.Code == 0 || !strings.Contains(r.Stderr, "example.com/acme/hello may not run on this host") || !strings.Contains(r.Stderr, recipe) {
			t.Errorf("hello through a far side that allows only the cloud provider: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})

	nothing := func(t *testing.T, got map[string]string, port bool) {
		t.Helper()
		if got["metadata"] != "" || !strings.Contains(got["missing"], "metadata:") {
			t.Errorf("the provider reached the metadata port: %q", got)
		}
		if port {
			return
		}
		if got["region"] != "" || got["credentials"] != "" {
			t.Errorf("the provider saw credentials without the far configuration: %q", got)
		}
		for _, want := range []string{"no AWS_REGION", "credentials:"} {
			if !strings.Contains(got["missing"], want) {
				t.Errorf("missing lacks %q: %q", want, got["missing"])
			}
		}
	}
	t.Run("fails closed: no far configuration", func(t *testing.T) {
		r, got := w.apply(t, remoteBlockFor("registry.example.com/acme/aws", w.forced(t, "--require-sandbox")))
		if r.Code != 0 {
			t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		nothing(t, got, false)
	})
	t.Run("fails closed: another port", func(t *testing.T) {
		other := w.hostConfig(t, "other-port.hcl", strings.Replace(w.docCloudRecipe(t), "connect = ["+strconv.Itoa(w.metadataPort)+", 443]", "connect = [443]", 1))
		r, got := w.apply(t, remoteBlockFor("registry.example.com/acme/aws", w.forced(t, "--config", other, "--require-sandbox")))
		if r.Code != 0 {
			t.Fatalf("exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		nothing(t, got, true)
		if got["region"] != w.farRegion || got["credentials"] == "" {
			t.Errorf("with connect = [443] the variable and the file should still be seen: %q", got)
		}
	})
}

// remoteWalkthrough is docs/remote.md's blocks marked <!-- doctest remote: STEP -->, by step.
func remoteWalkthrough(t *testing.T) map[string]doccheck.Block {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "remote.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]doccheck.Block{}
	for _, b := range doccheck.Parse(string(data)).Blocks {
		if name, ok := strings.CutPrefix(b.Marker, "doctest remote: "); ok {
			if _, dup := steps[name]; dup {
				t.Fatalf("docs/remote.md:%d: a second block for the step %q", b.Line, name)
			}
			steps[name] = b
		}
	}
	return steps
}

// TestRemoteWalkthrough runs docs/remote.md's "first connection to a working apply", every block
// of it, in order, against a real sshd: the near side's key and the far host's key taken with
// ssh-keyscan into a pinned known_hosts file, the ssh configuration that uses them, the forced
// command (an absolute path to oprov and an AWS_* variable) in the far account's authorized_keys,
// the far configuration (the cloud recipe), the smoke test (the far side's hello), the remote
// block, and the apply, which the stand-in cloud provider answers with all three credentials of
// the far side. The page's host, port, account, home and paths are replaced by the test's, and
// each replaced text must be on the page, so the page and the test cannot drift apart.
func TestRemoteWalkthrough(t *testing.T) {
	w := newFarConfigWorld(t)
	steps := remoteWalkthrough(t)
	order := []string{"far configuration", "keys", "ssh config", "forced command", "smoke test", "remote block", "apply"}
	for name, b := range steps {
		if !slices.Contains(order, name) {
			t.Errorf("docs/remote.md:%d: the step %q is not one this test runs (%q)", b.Line, name, order)
		}
	}
	for _, name := range order {
		if _, ok := steps[name]; !ok {
			t.Fatalf("docs/remote.md has no block marked <!-- doctest remote: %s -->", name)
		}
	}
	hostPath := filepath.Join(w.farDir, "host.hcl")
	port := strconv.Itoa(w.far.port)
	replaced := map[string]bool{}
	subst := func(text string, pairs ...string) string {
		pairs = append(pairs, "/home/me/", w.nearHome+"/", "bastion.example.com", "127.0.0.1", "-p 22 ", "-p "+port+" ",
			"Port 22\n", "Port "+port+"\n", "User deploy\n", "User "+remoteUser+"\n",
			"/usr/local/bin/oprov", w.far.oprov, "/etc/oprov/host.hcl", hostPath)
		for i := 0; i < len(pairs); i += 2 {
			if strings.Contains(text, pairs[i]) {
				replaced[pairs[i]] = true
				text = strings.ReplaceAll(text, pairs[i], pairs[i+1])
			}
		}
		return text
	}
	sshBin := peers.Require(t, "ssh")
	env := append(w.env, "PATH="+filepath.Dir(oprovBin)+":"+filepath.Dir(sshBin)+":"+filepath.Dir(w.tofu)+":/usr/local/bin:/usr/bin:/bin")
	run := func(step, script, stdin string, pipefail bool) result {
		t.Helper()
		args := []string{"-eu"}
		if pipefail {
			args = append(args, "-o", "pipefail")
		}
		cmd := exec.Command("bash", append(args, "-c", script)...)
		cmd.Dir, cmd.Env, cmd.Stdin = w.f.cfg, append(os.Environ(), env...), strings.NewReader(stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		r := result{Stdout: stdout.String(), Stderr: stderr.String()}
		if err != nil {
			t.Fatalf("docs/remote.md:%d, step %q: %v\n%s\nstdout:\n%s\nstderr:\n%s", steps[step].Line, step, err, script, r.Stdout, r.Stderr)
		}
		return r
	}

	// 4 (first, since the forced command names it): the far configuration.
	w.hostConfig(t, "host.hcl", w.docCloudRecipe(t))
	// 1: the keys.
	run("keys", subst(steps["keys"].Text), "", true)
	// 2: the ssh configuration.
	writeFile(t, filepath.Join(w.nearHome, ".ssh", "oprov", "config"), subst(steps["ssh config"].Text))
	// 3: the forced command, with the near side's public key, and (for this test's registry and
	// metadata stand-in) its CA file and the metadata endpoint in the environment.
	pub, err := os.ReadFile(filepath.Join(w.nearHome, ".ssh", "oprov", "id_deploy.pub"))
	if err != nil {
		t.Fatal(err)
	}
	line := subst(steps["forced command"].Text, "ssh-ed25519 AAAA... deploy@ci", strings.TrimSpace(string(pub)),
		"env AWS_REGION=", "env SSL_CERT_FILE="+filepath.Join(w.farDir, "ca.pem")+" AWS_EC2_METADATA_SERVICE_ENDPOINT=http://127.0.0.1:"+strconv.Itoa(w.metadataPort)+"/ AWS_REGION=")
	authorized := filepath.Join(w.far.home, ".ssh", "authorized_keys")
	editAuthorized(t, authorized, func(s string) string { return s + line })
	t.Cleanup(func() {
		editAuthorized(t, authorized, func(s string) string { return strings.Replace(s, line, "", 1) })
	})
	// 5: the smoke test, as a reader types it (no pipefail: the far side ends on the missing request).
	r := run("smoke test", subst(steps["smoke test"].Text), "", false)
	t.Logf("the smoke test printed %q; its stderr: %q", r.Stdout, r.Stderr)
	expectIn(t, "the smoke test's stderr (the page quotes it)", r.Stderr, "reading the request: EOF")
	if want := `{"oprov_remote":`; !strings.HasPrefix(r.Stdout, want) || !strings.Contains(r.Stdout, `"platform":"`+runtime.GOOS+"_"+runtime.GOARCH+`"`) {
		t.Errorf("the smoke test printed %q, want the far side's hello (%s...)\nstderr:\n%s", r.Stdout, want, r.Stderr)
	}
	// 6: the remote block.
	writeFile(t, filepath.Join(w.f.cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", w.f.reg.Host, "%KEYS%", w.f.keys).Replace(farNearHCL)+subst(steps["remote block"].Text))
	// 7: the apply, answering tofu's question.
	r = run("apply", subst(steps["apply"].Text), "yes\n", true)
	expectIn(t, "the walkthrough's apply", r.Stderr, `on remote "registry.example.com/acme/aws" (ssh)`)
	expectIn(t, "the walkthrough's apply", r.Stdout, `region = "eu-west-1"`, `metadata = "`+w.metadataReply+`"`, "FAR-SECRET")
	if strings.Contains(r.Stdout, "NEAR-SECRET") || strings.Contains(r.Stdout, "near-region") {
		t.Errorf("the near side's credentials reached the provider:\n%s", r.Stdout)
	}
	for _, from := range []string{"/home/me/", "bastion.example.com", "-p 22 ", "Port 22\n", "User deploy\n", "/usr/local/bin/oprov", "/etc/oprov/host.hcl", "ssh-ed25519 AAAA... deploy@ci", "env AWS_REGION="} {
		if !replaced[from] {
			t.Errorf("docs/remote.md's walkthrough no longer says %q, which this test replaces", from)
		}
	}
}
