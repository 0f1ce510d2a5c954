package sigstack

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// Stack is the running services and the files that describe them.
type Stack struct {
	Issuer    *Issuer
	FulcioURL string // Fulcio's base URL
	TSAURL    string // the timestamp endpoint (…/api/v1/timestamp)
	Dir       string
	// TrustedRoot is trusted_root.json, as cosign trusted-root create wrote it: the Fulcio CA
	// and the TSA (no transparency log, no CT log: none runs here).
	TrustedRoot string
	// SigningConfig is the signing config cosign v3 reads (--signing-config).
	SigningConfig string
	// FulcioChain and TSAChain are the services' certificate chains (PEM).
	FulcioChain, TSAChain string
	// RekorURL is the Rekor v2's base URL, when one runs.
	RekorURL string
	// Cosign3 is the cosign v3 CLI.
	Cosign3 string

	stops []func()
}

// Stop ends the issuer, Fulcio and the TSA now (the test's end would): what runs after can
// only be offline.
func (s *Stack) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// startTimeout bounds how long the services get to come up.
const startTimeout = 120 * time.Second

// Start runs the issuer, Fulcio and the TSA for the test, and stops them when it ends. The
// timestamp authority listens for metrics on the fixed port 2112, so one runs at a time on a
// machine: Start waits (bounded) for a lock another test process may hold.
func Start(t testing.TB) *Stack {
	t.Helper()
	return StartWith(t, Options{})
}

// Options say which optional services run.
type Options struct {
	// Rekor runs a Rekor v2 (rekor-tiles, POSIX storage) as the transparency log, listed in the
	// trusted root and the signing config.
	Rekor bool
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Stack {
	t.Helper()
	fulcio := peers.Require(t, "fulcio")
	tsa := peers.Require(t, "timestamp-server")
	cosign3 := peers.Require(t, "cosign3")
	dir := t.TempDir()
	s := &Stack{Dir: dir, Cosign3: cosign3}
	deadline := time.Now().Add(startTimeout)

	is, err := StartIssuer()
	if err != nil {
		t.Fatal(err)
	}
	s.Issuer = is
	s.stops = append(s.stops, is.Close)
	t.Cleanup(s.Stop)

	s.stops = append(s.stops, lockTSA(t, deadline))

	// Fulcio, with an ephemeral CA, trusting our issuer as GitHub Actions'.
	// JSON, with the JSON field names: Fulcio tries JSON first, and JSON with YAML's names parses
	// as an empty configuration.
	cfg := fmt.Sprintf(`{"OIDCIssuers": {%q: {"IssuerURL": %q, "ClientID": "sigstore", "Type": "github-workflow"}}}`, is.URL, is.URL)
	cfgPath := filepath.Join(dir, "fulcio.json")
	write(t, cfgPath, cfg)
	fp, gp, mp := freePort(t), freePort(t), freePort(t)
	s.FulcioURL = "http://127.0.0.1:" + fp
	s.run(t, dir, "fulcio", fulcio, "serve", "--ca", "ephemeralca", "--ct-log-url", "",
		"--host", "127.0.0.1", "--port", fp, "--grpc-host", "127.0.0.1", "--grpc-port", gp, "--metrics-port", mp,
		"--legacy-unix-domain-socket", filepath.Join(dir, "fulcio-legacy.sock"), "--config-path", cfgPath)

	tp := freePort(t)
	tsaBase := "http://127.0.0.1:" + tp
	s.TSAURL = tsaBase + "/api/v1/timestamp"
	s.run(t, dir, "tsa", tsa, "serve", "--host", "127.0.0.1", "--port", tp, "--timestamp-signer", "memory", "--disable-ntp-monitoring")

	var rekorArgs []string
	if opts.Rekor {
		rekorArgs = s.startRekor(t, dir)
	}

	s.FulcioChain = filepath.Join(dir, "fulcio-chain.pem")
	write(t, s.FulcioChain, waitGet(t, s.FulcioURL+"/api/v1/rootCert", deadline, dir, "fulcio"))
	s.TSAChain = filepath.Join(dir, "tsa-chain.pem")
	write(t, s.TSAChain, waitGet(t, tsaBase+"/api/v1/timestamp/certchain", deadline, dir, "tsa"))

	s.TrustedRoot = filepath.Join(dir, "trusted_root.json")
	if s.RekorURL != "" {
		waitGet(t, s.RekorURL+"/healthz", deadline, dir, "rekor")
	}
	out, err := exec.Command(cosign3, append([]string{"trusted-root", "create",
		"--fulcio=url=" + s.FulcioURL + ",certificate-chain=" + s.FulcioChain,
		"--tsa=url=" + s.TSAURL + ",certificate-chain=" + s.TSAChain,
		"--out", s.TrustedRoot}, rekorArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("cosign trusted-root create: %v\n%s", err, out)
	}

	s.SigningConfig = filepath.Join(dir, "signing_config.json")
	svcV := func(url string, v int) map[string]any {
		return map[string]any{"url": url, "majorApiVersion": v, "validFor": map[string]string{"start": "2020-01-01T00:00:00Z"}, "operator": "sigstack"}
	}
	svc := func(url string) map[string]any { return svcV(url, 1) }
	rekors := []any{}
	if s.RekorURL != "" {
		rekors = append(rekors, svcV(s.RekorURL, 2))
	}
	sc, _ := json.MarshalIndent(map[string]any{
		"mediaType":       "application/vnd.dev.sigstore.signingconfig.v0.2+json",
		"caUrls":          []any{svc(s.FulcioURL)},
		"oidcUrls":        []any{},
		"rekorTlogUrls":   rekors,
		"rekorTlogConfig": map[string]any{"selector": "ANY"},
		"tsaUrls":         []any{svc(s.TSAURL)},
		"tsaConfig":       map[string]any{"selector": "ANY"},
	}, "", "  ")
	write(t, s.SigningConfig, string(sc))
	return s
}

// Token mints an identity token for a workflow run (see Issuer.Token).
func (s *Stack) Token(t testing.TB, w Workflow) string {
	t.Helper()
	tok, err := s.Issuer.Token(w)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// run starts a service in its own process group, logging to dir/name.log, and kills the group
// at Stop.
func (s *Stack) run(t testing.TB, dir, name, bin string, args ...string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.stops = append(s.stops, func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
}

// waitGet polls url until it answers 200, and returns the body; past the deadline it fails the
// test with the service's log.
func waitGet(t testing.TB, url string, deadline time.Time, dir, name string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(body)) > 0 {
				return string(body)
			}
		}
		if time.Now().After(deadline) {
			logData, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			t.Fatalf("%s did not answer %s in time (last error %v); its log:\n%s", name, url, err, tail(logData, 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// lockTSA takes the machine-wide lock for the TSA's fixed metrics port, waiting until deadline.
func lockTSA(t testing.TB, deadline time.Time) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "oprov-sigstack-tsa.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		select {
		case <-ctx.Done():
			f.Close()
			t.Fatal("another test process holds the timestamp authority (its metrics port 2112 is fixed); gave up waiting")
		case <-time.After(250 * time.Millisecond):
		}
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

// Logs gives the end of the services' logs, for failure messages.
func (s *Stack) Logs() string {
	var out string
	for _, name := range []string{"fulcio", "tsa", "rekor"} {
		data, _ := os.ReadFile(filepath.Join(s.Dir, name+".log"))
		var keep []string
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") || strings.Contains(l, "rror") {
				keep = append(keep, l)
			}
		}
		out += "--- " + name + " log, warnings and errors:\n" + tail([]byte(strings.Join(keep, "\n")), 3000) + "\n"
	}
	return out
}

// startRekor runs a Rekor v2 with POSIX storage and a fresh ECDSA key, and returns the
// trusted-root create flag that lists it.
func (s *Stack) startRekor(t testing.TB, dir string) []string {
	t.Helper()
	bin := peers.Require(t, "rekor-server")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	keyPath := filepath.Join(dir, "rekor.key")
	write(t, keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPath := filepath.Join(dir, "rekor.pub")
	write(t, pubPath, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
	hp, gp, mp := freePort(t), freePort(t), freePort(t)
	// Verifiers (sigstore-go) take the checkpoint origin from the host of the log's URL in the
	// trusted root.
	const origin = "127.0.0.1"
	s.RekorURL = "http://127.0.0.1:" + hp
	s.run(t, dir, "rekor", bin, "serve", "--http-address", "127.0.0.1", "--http-port", hp, "--grpc-address", "127.0.0.1", "--grpc-port", gp,
		"--http-metrics-port", mp, "--hostname", origin, "--storage-dir", filepath.Join(dir, "rekor-tiles"), "--signer-filepath", keyPath,
		"--checkpoint-interval", "1s")
	return []string{"--rekor=url=" + s.RekorURL + ",public-key=" + pubPath + ",start-time=2020-01-01T00:00:00Z,origin=" + origin}
}
