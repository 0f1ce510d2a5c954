package main

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"oras.land/oras-go/v2"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// countingRegistry is an in-process registry (go-containerregistry's, plain HTTP on 127.0.0.1)
// that counts the requests for each manifest path: "HEAD /v2/REPO/manifests/TAG" -> n.
type countingRegistry struct {
	host string
	mu   sync.Mutex
	n    map[string]int
}

func startCountingRegistry(t *testing.T) *countingRegistry {
	t.Helper()
	r := &countingRegistry{n: map[string]int{}}
	inner := registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.Contains(req.URL.Path, "/manifests/") {
			r.mu.Lock()
			r.n[req.Method+" "+req.URL.Path]++
			r.mu.Unlock()
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// tagRequests is how many GET and HEAD requests asked for repo's tag since the last reset.
func (r *countingRegistry) tagRequests(repo, tag string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := "/v2/" + repo + "/manifests/" + tag
	return r.n["GET "+p] + r.n["HEAD "+p]
}

func (r *countingRegistry) reset() {
	r.mu.Lock()
	r.n = map[string]int{}
	r.mu.Unlock()
}

// TestCommandsAskForTheTagOnce: 'oprov verify' of a provider, a module and an image, each signed,
// in a registry that counts requests: each asks for the tag one time, and reads everything else
// by the digest that answer gave, as the JSON says it verified (a tag read three times could
// name three different things). 'oprov inspect' and 'oprov sign' resolve through the same
// sign.Resolve: the tag once, and an image refused as neither a provider nor a module.
func TestCommandsAskForTheTagOnce(t *testing.T) {
	ctx := context.Background()
	reg := startCountingRegistry(t)
	key, pub := keyPair(t, "k")

	// A provider, pushed and signed through the commands.
	provider := reg.host + "/providers/acme/hello"
	if _, stderr, code := runCLI(t, "push", packageHello(t), provider, "--plain-http"); code != 0 {
		t.Fatalf("push: %s", stderr)
	}
	if _, stderr, code := runCLI(t, "sign", provider+":1.0.0", "--key", key, "--plain-http"); code != 0 {
		t.Fatalf("sign: %s", stderr)
	}
	// A module, pushed and signed.
	module := reg.host + "/modules/network"
	if _, stderr, code := runCLI(t, "push", "--module", writeModule(t), module+":1.0.0", "--sign", "--key", key, "--plain-http"); code != 0 {
		t.Fatalf("push --module: %s", stderr)
	}
	// An image index, copied from a layout and signed as cosign signs images.
	image := reg.host + "/images/serve"
	dir, index, _ := imageLayout(t, "1.0.0", 0, nil)
	src, err := oci.NewClient(oci.Options{}).Open(ctx, oci.Ref{Layout: dir, Reference: "1.0.0"}, false)
	if err != nil {
		t.Fatal(err)
	}
	imageRef, err := oci.ParseRef(image + ":1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := oci.NewClient(oci.Options{PlainHTTP: true}).Open(ctx, imageRef, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oras.Copy(ctx, src, "1.0.0", dst, "1.0.0", oras.DefaultCopyOptions); err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadSigner(key, sign.EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Sign(ctx, dst, imageRef, index, signer, sign.SignOptions{Legacy: true}); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct{ kind, repo string }{
		{"provider", provider},
		{"module", module},
		{"image", image},
	} {
		t.Run(c.kind, func(t *testing.T) {
			reg.reset()
			var out struct {
				Verified bool `json:"verified"`
			}
			cliJSON(t, &out, "verify", c.repo+":1.0.0", "--key", pub, "--kind", c.kind, "--plain-http")
			if !out.Verified {
				t.Fatalf("verify %s: not verified", c.kind)
			}
			repo := strings.TrimPrefix(c.repo, reg.host+"/")
			if n := reg.tagRequests(repo, "1.0.0"); n != 1 {
				t.Errorf("verify of the %s asked for its tag %d times, want once (then by digest)", c.kind, n)
			}
			// inspect and sign resolve a reference as verify does: the tag once. An image is
			// neither a provider nor a module: both say so.
			for _, cmd := range [][]string{{"inspect", c.repo + ":1.0.0", "--plain-http"}, {"sign", c.repo + ":1.0.0", "--key", key, "--plain-http"}} {
				reg.reset()
				_, stderr, code := runCLI(t, cmd...)
				if c.kind == "image" {
					if code == 0 || !strings.Contains(stderr, "is an image or another artifact") {
						t.Errorf("%s of an image: exit %d, %s", cmd[0], code, stderr)
					}
				} else if code != 0 {
					t.Fatalf("%s of the %s: exit %d, %s", cmd[0], c.kind, code, stderr)
				}
				if n := reg.tagRequests(repo, "1.0.0"); n != 1 {
					t.Errorf("%s of the %s asked for its tag %d times, want once", cmd[0], c.kind, n)
				}
			}
		})
	}
}
