package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
)

// countingTarget counts the fetches of each digest.
type countingTarget struct {
	oci.Target
	fetches map[digest.Digest]*atomic.Int64
}

func (c countingTarget) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	if n, ok := c.fetches[d.Digest]; ok {
		n.Add(1)
	}
	return c.Target.Fetch(ctx, d)
}

// TestVerifyImageManifestBytesBounded: a signed index cannot make verify fetch more manifest
// bytes than a bound, however it lists them: the same manifest listed many times is fetched once,
// and distinct manifests whose sizes add up to more than the bound are refused before any is
// fetched, naming the limit.
func TestVerifyImageManifestBytesBounded(t *testing.T) {
	key, pub := keyPair(t, "k")
	t.Run("one manifest listed many times", func(t *testing.T) {
		dir, index, entries := imageLayout(t, "1.2.3", 100, nil)
		signImage(t, dir, "1.2.3", key, index)
		counts := countingTarget{fetches: map[digest.Digest]*atomic.Int64{entries[0].Digest: {}}}
		var out, errb bytes.Buffer
		ios := &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb}
		ios.Factory.OpenTarget = func(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error) {
			target, err := oci.NewClient(oci.Options{}).Open(ctx, ref, create)
			counts.Target = target
			return counts, err
		}
		code := run(context.Background(), ios, []string{"verify", "oci-layout:" + dir + ":1.2.3", "--key", pub})
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
		}
		if n := counts.fetches[entries[0].Digest].Load(); n != 1 {
			t.Errorf("the manifest listed 101 times was fetched %d times, want once", n)
		}
	})
	t.Run("manifests over the bound in all", func(t *testing.T) {
		dir, index, _ := imageLayout(t, "1.2.3", 6, func(all []ocispec.Descriptor) {
			for i := 2; i < len(all); i++ {
				all[i] = ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString(fmt.Sprint("big", i)), Size: manifest.MaxManifestSize}
			}
		})
		signImage(t, dir, "1.2.3", key, index)
		_, stderr, code := runCLI(t, "verify", "oci-layout:"+dir+":1.2.3", "--key", pub)
		if code == 0 || !strings.Contains(stderr, "in all, over the limit of") {
			t.Errorf("exit %d, %s", code, stderr)
		}
	})
}

// TestVerifyImageNotCoveredByProviderRules: a signed image, even at a tag where a provider was,
// is not covered by a policy rule that names providers (even all of them, "**"), signed by that
// rule's key: provider rules trust providers, which an image is not.
func TestVerifyImageNotCoveredByProviderRules(t *testing.T) {
	key, pub := keyPair(t, "k")
	dir, index, _ := imageLayout(t, "1.0.0", 0, nil)
	signImage(t, dir, "1.0.0", key, index)
	policy := filepath.Join(t.TempDir(), "policy.hcl")
	src := "trust \"every provider\" {\n  providers = [\"**\"]\n  keys      = [\"" + pub + "\"]\n}\n"
	if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := runCLI(t, "verify", "oci-layout:"+dir+":1.0.0", "--policy", policy)
	if code == 0 || !strings.Contains(stderr, "no trust rule in "+policy+" covers") {
		t.Errorf("a provider rule covered an image: exit %d\n%s%s", code, out, stderr)
	}
}
