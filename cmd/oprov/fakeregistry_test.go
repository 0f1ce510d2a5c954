package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/oci"
)

// fakeRegistry is a registry that exists only through the factory: every reference to its host
// opens one OCI layout (hello 1.0.0, signed), and it records what was opened. No network.
type fakeRegistry struct {
	host   string
	layout string
	mu     sync.Mutex
	opened []string
}

func (f *fakeRegistry) open(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error) {
	if ref.Registry != f.host {
		return nil, fmt.Errorf("the fake registry has no %s", ref)
	}
	f.mu.Lock()
	f.opened = append(f.opened, ref.Repository)
	f.mu.Unlock()
	return oci.NewClient(oci.Options{}).Open(ctx, oci.Ref{Layout: f.layout, Reference: ref.Reference}, create)
}

// took says how many opens there were since the last call.
func (f *fakeRegistry) took() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.opened
	f.opened = nil
	return out
}

// TestFactoryGivesEveryCommandItsRegistry: install, lock, save --config and serve reach their
// registry only through the factory's one client, so a test hands them a registry of its own. The
// host does not resolve: a request that went around the factory would fail.
func TestFactoryGivesEveryCommandItsRegistry(t *testing.T) {
	ctx := context.Background()
	repo, _ := pushedLayout(t)
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, false)
	fake := &fakeRegistry{host: "registry.invalid", layout: strings.TrimPrefix(repo, "oci-layout:")}
	withFake := func() (*IOStreams, *strings.Builder) {
		var out strings.Builder
		ios := &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: io.Discard}
		ios.Factory.OpenTarget = fake.open
		return ios, &out
	}

	dir, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	writeFile(t, filepath.Join(dir, "main.tf"), `terraform {
  required_providers {
    hello = { source = "example.com/acme/hello", version = "1.0.0" }
  }
}
`)
	writeFile(t, filepath.Join(dir, "oprov.hcl"), `oci_mirror {
  repository_template = "registry.invalid/providers/${namespace}/${type}"
  include             = ["example.com/acme/hello"]
  public_keys         = ["`+pub+`"]
}
`)
	flags := loaderFlags{Dir: dir, CacheDir: cache}

	ios, _ := withFake()
	if err := runLock(ctx, &lockOptions{io: ios, flags: flags, output: textOut}); err != nil {
		t.Fatalf("lock through the fake registry: %v", err)
	}
	lock, _ := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if !strings.Contains(string(lock), `provider "example.com/acme/hello"`) || !strings.Contains(string(lock), `"h1:`) {
		t.Errorf("lock file:\n%s", lock)
	}
	if got := fake.took(); len(got) == 0 || got[0] != "providers/acme/hello" {
		t.Errorf("lock opened %v", got)
	}

	ios, _ = withFake()
	flags.CacheDir = filepath.Join(t.TempDir(), "cold") // a cold cache, so install must reach the registry
	if err := runInstall(ctx, &installOptions{io: ios, flags: flags, output: jsonOut}); err != nil && !strings.Contains(err.Error(), "no package for") {
		t.Fatalf("install through the fake registry: %v", err)
	}
	if got := fake.took(); len(got) == 0 {
		t.Error("install did not open the fake registry")
	}

	ios, _ = withFake()
	tarball := filepath.Join(t.TempDir(), "deps.tar")
	if err := runSave(ctx, &saveOptions{io: ios, Config: dir, Out: tarball, Platforms: []string{"linux_amd64"}, output: textOut}); err != nil {
		t.Fatalf("save --config through the fake registry: %v", err)
	}
	if st, err := os.Stat(tarball); err != nil || st.Size() == 0 {
		t.Errorf("save wrote %v", err)
	}
	if got := fake.took(); len(got) == 0 {
		t.Error("save did not open the fake registry")
	}

	serveThroughFake(t, withFake, pub)
	if got := fake.took(); len(got) == 0 {
		t.Error("serve did not open the fake registry")
	}
}

// serveThroughFake runs serve on the fake registry and asks it for hello's versions.
func serveThroughFake(t *testing.T, withFake func() (*IOStreams, *strings.Builder), pub string) {
	t.Helper()
	ios, _ := withFake()
	out := &lockedBuffer{}
	ios.Out = out
	o := &serveOptions{
		io: ios, Source: "registry.invalid/providers/${namespace}/${type}", Include: []string{"example.com/acme/*"},
		Keys: []string{pub}, Listen: "127.0.0.1:0", StateDir: filepath.Join(t.TempDir(), "state"), CacheDir: filepath.Join(t.TempDir(), "cache"),
		Concurrency: 2, Refresh: time.Minute, Drain: time.Minute, output: jsonOut,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	defer func() {
		cancel()
		<-done
	}()
	var info serveInfo
	for deadline := time.Now().Add(10 * time.Second); json.Unmarshal(out.Bytes(), &info) != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no JSON: %q", out.Bytes())
		}
	}
	pem, err := os.ReadFile(info.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(info.URL + "example.com/acme/hello/index.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"versions":{"1.0.0":{}}}` {
		t.Errorf("serve's index.json through the fake registry: %d %q", resp.StatusCode, body)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
