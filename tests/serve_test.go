package tests

import (
	"bufio"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// served is a running `oprov serve`.
type served struct {
	URL       string `json:"url"`
	CAFile    string `json:"ca_file"`
	CLIConfig string `json:"cli_config"`
	Listen    string `json:"listen"`
	cmd       *exec.Cmd
	logPath   string
	rssPath   string // set when measured through rsswrap
	exited    chan struct{}
	client    *http.Client
}

// startServe starts `oprov serve ARGS` on a free port with its own state directory (for the local
// CA) and waits until it prints where it listens. With rss, it runs through rsswrap.
func startServe(t testing.TB, env []string, rss bool, args ...string) *served {
	t.Helper()
	return startServeUnder(t, env, nil, rss, args...)
}

// startServeUnder is startServe with the command run through wrapper (a command line taking the
// server's as its last arguments), such as prlimit.
func startServeUnder(t testing.TB, env, wrapper []string, rss bool, args ...string) *served {
	t.Helper()
	dir := t.TempDir()
	rssPath := ""
	argv := append([]string{oprovBin, "serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state"), "-o", "json"}, args...)
	argv = append(append([]string(nil), wrapper...), argv...)
	if rss {
		rssPath = filepath.Join(dir, "rss")
		argv = append([]string{rssWrap, rssPath}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	s := startServeCmd(t, cmd)
	s.rssPath = rssPath
	if s.CAFile != "" { // else the operator's certificate: the test trusts its CA itself
		s.client = caClient(t, s.CAFile)
	}
	return s
}

// startServeCmd starts cmd, an `oprov serve -o json`, and waits until it prints where it listens;
// the caller sets the client.
func startServeCmd(t testing.TB, cmd *exec.Cmd) *served {
	t.Helper()
	s := &served{cmd: cmd, logPath: filepath.Join(t.TempDir(), "serve.log"), exited: make(chan struct{})}
	logf, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = logf
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); logf.Close(); close(s.exited) }()
	t.Cleanup(func() { s.cmd.Process.Kill(); <-s.exited })
	decoded := make(chan error, 1)
	go func() { decoded <- json.NewDecoder(bufio.NewReader(stdout)).Decode(s) }()
	select {
	case err := <-decoded:
		if err != nil {
			t.Fatalf("oprov serve printed no JSON: %v\n%s", err, s.logText())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("oprov serve did not start within a minute\n%s", s.logText())
	}
	return s
}

func caClient(t testing.TB, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func (s *served) logText() string {
	data, _ := os.ReadFile(s.logPath)
	return string(data)
}

// logLines gives the access-log lines for a path.
func (s *served) logLines(path string) []string {
	var out []string
	for _, l := range strings.Split(s.logText(), "\n") {
		if strings.Contains(l, `"path":"`+path+`"`) {
			out = append(out, l)
		}
	}
	return out
}

// get fetches a path below the mirror's URL and gives the status and the body's sha256 (hex).
func (s *served) get(t testing.TB, path string) (int, string, []byte) {
	t.Helper()
	resp, err := s.client.Get(s.URL + strings.TrimPrefix(path, "/"))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	sum := sha256.Sum256(body)
	return resp.StatusCode, hex.EncodeToString(sum[:]), body
}

// stop sends sig and waits for the server to exit; it gives the exit code.
func (s *served) stop(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	s.cmd.Process.Signal(sig)
	return s.wait(t)
}

// wait waits for the server to exit and gives its exit code.
func (s *served) wait(t testing.TB) int {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("oprov serve did not exit\n%s", s.logText())
	}
	return s.cmd.ProcessState.ExitCode()
}

// peakRSS gives the server's peak RSS in MiB once it has exited (when run through rsswrap).
func (s *served) peakRSS(t testing.TB) float64 {
	t.Helper()
	data, err := os.ReadFile(s.rssPath)
	if err != nil {
		t.Fatal(err)
	}
	var kib float64
	fmt.Sscan(string(data), &kib)
	return kib / 1024
}

const helloPath = "/example.com/acme/hello/"

func helloArchive(version, platform string) string {
	return helloPath + "terraform-provider-hello_" + version + "_" + platform + ".zip"
}

// helloInRegistry starts a TLS registry holding examples/hello 1.0.0 and gives the registry and
// the serve arguments for it (a repository template, trusting the registry's CA).
func helloInRegistry(t testing.TB, extra ...string) (*testreg.Registry, []string) {
	t.Helper()
	reg := testreg.Start(t, testreg.Options{})
	pushJSON(t, nil, helloRelease(t), reg.Host+"/providers/acme/hello", "--ca-file", reg.CAFile, "--address", "example.com/acme/hello")
	return reg, serveFromRegistry(t, reg.Host, reg.CAFile)
}

func serveFromRegistry(t testing.TB, host, caFile string) []string {
	return []string{host + "/providers/${namespace}/${type}", "--ca-file", caFile, "--cache-dir", filepath.Join(t.TempDir(), "cache")}
}

// TestServeClients: Terraform 1.5.7 and OpenTofu 1.12 lock every platform through the mirror,
// install through network_mirror and apply, with the mirror backed by the TLS test registry and
// by an OCI layout.
func TestServeClients(t *testing.T) {
	clients := map[string]string{"tofu": peers.Require(t, "tofu"), "terraform": peers.Require(t, "terraform")}
	backends := map[string]func(t *testing.T) []string{
		"registry": func(t *testing.T) []string { _, args := helloInRegistry(t); return args },
		"layout": func(t *testing.T) []string {
			layout := "oci-layout:" + filepath.Join(t.TempDir(), "layout")
			mustOprov(t, nil, "push", helloRelease(t), layout, "--address", "example.com/acme/hello")
			return []string{layout, "--address", "example.com/acme/hello", "--cache-dir", filepath.Join(t.TempDir(), "cache")}
		},
	}
	for backend, args := range backends {
		t.Run(backend, func(t *testing.T) {
			s := startServe(t, nil, false, args(t)...)
			for name, bin := range clients {
				t.Run(name, func(t *testing.T) { installThroughMirror(t, s, bin, name == "tofu") })
			}
		})
	}
}

// installThroughMirror locks every platform with `providers lock -net-mirror`, then runs init
// (through the printed CLI configuration) and apply, and checks the outputs and the lock.
func installThroughMirror(t *testing.T, s *served, bin string, tofu bool) {
	work := t.TempDir()
	rc := filepath.Join(work, "mirror.tfrc")
	writeFile(t, rc, s.CLIConfig)
	cfg := filepath.Join(work, "cfg")
	tf := helloConfig
	if tofu {
		tf += helloFunctionOutput
	}
	writeFile(t, filepath.Join(cfg, "main.tf"), tf)
	env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + s.CAFile, "HOME=" + work}
	lockArgs := []string{"providers", "lock", "-net-mirror=" + s.URL}
	for _, p := range helloPlatforms {
		lockArgs = append(lockArgs, "-platform="+p)
	}
	mustTofu(t, bin, cfg, env, append(lockArgs, "example.com/acme/hello")...)
	lock := filepath.Join(cfg, ".terraform.lock.hcl")
	hashes := lockHashes(t, lock, "example.com/acme/hello")
	for _, p := range helloPlatforms {
		want := []string{helloHashes[p].H1}
		if tofu { // Terraform records only the h1: it computes; OpenTofu also the zh: it checked
			want = append(want, helloHashes[p].ZH)
		}
		for _, h := range want {
			if !contains(hashes, h) {
				t.Errorf("the lock lacks %s's %s: %v", p, h, hashes)
			}
		}
	}
	out := mustTofu(t, bin, cfg, env, "init", "-input=false")
	if strings.Contains(strings.ToLower(out), "incomplete lock file") || !strings.Contains(out, "example.com/acme/hello") {
		t.Errorf("init through the mirror:\n%s", out)
	}
	if after := lockHashes(t, lock, "example.com/acme/hello"); len(after) != len(hashes) {
		t.Errorf("init changed the lock's hashes from %v to %v", hashes, after)
	}
	mustTofu(t, bin, cfg, env, "apply", "-auto-approve", "-input=false")
	expectHelloOutputs(t, bin, cfg, env, tofu)
}
