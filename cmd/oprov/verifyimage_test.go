package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	orasoci "oras.land/oras-go/v2/content/oci"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// imageLayout writes to a new OCI layout a container image index for linux/amd64 and linux/arm64
// (each a config and one layer), tagged tag, plus extra entries of the index if asked, after edit
// (if not nil) changed the entries; it returns the layout's directory, the index and its entries.
func imageLayout(t *testing.T, tag string, extra int, edit func([]ocispec.Descriptor)) (string, ocispec.Descriptor, []ocispec.Descriptor) {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "image")
	store, err := orasoci.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	push := func(mediaType string, v any) ocispec.Descriptor {
		t.Helper()
		data, ok := v.([]byte)
		if !ok {
			if data, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
		if err := store.Push(ctx, d, bytes.NewReader(data)); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
		return d
	}
	layer := push(ocispec.MediaTypeImageLayer, []byte("not a tar, and no one reads it"))
	var entries []ocispec.Descriptor
	for _, arch := range []string{"amd64", "arm64"} {
		cfg := push(ocispec.MediaTypeImageConfig, ocispec.Image{Platform: ocispec.Platform{OS: "linux", Architecture: arch}})
		m := push(ocispec.MediaTypeImageManifest, ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2},
			MediaType: ocispec.MediaTypeImageManifest, Config: cfg, Layers: []ocispec.Descriptor{layer}})
		m.Platform = &ocispec.Platform{OS: "linux", Architecture: arch}
		entries = append(entries, m)
	}
	all := append([]ocispec.Descriptor(nil), entries...)
	for i := 0; i < extra; i++ {
		all = append(all, entries[0])
	}
	if edit != nil {
		edit(all)
	}
	index := push(ocispec.MediaTypeImageIndex, ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex, Manifests: all})
	if err := store.Tag(ctx, index, tag); err != nil {
		t.Fatal(err)
	}
	return dir, index, entries
}

// signImage signs what REPO:tag names with key, in cosign v2's .sig tag form as the cosign CLI
// signs images, through oprov's signing code (oprov sign takes providers and modules only).
func signImage(t *testing.T, dir, tag, key string, subject ocispec.Descriptor) {
	t.Helper()
	ctx := context.Background()
	ref := oci.Ref{Layout: dir, Reference: tag}
	target, err := oci.NewClient(oci.Options{}).Open(ctx, ref, false)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadSigner(key, sign.EnvPassword(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.Sign(ctx, target, ref, subject, signer, sign.SignOptions{Legacy: true}); err != nil {
		t.Fatal(err)
	}
}

// lyingTarget serves other bytes, of the same size, for one digest.
type lyingTarget struct {
	oci.Target
	lie digest.Digest
}

func (l lyingTarget) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	rc, err := l.Target.Fetch(ctx, d)
	if err != nil || d.Digest != l.lie {
		return rc, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	data[len(data)-2] ^= 1
	return io.NopCloser(bytes.NewReader(data)), nil
}

// TestVerifyImage: verify takes a signed container image (oprov's own serve image is one) as
// cosign verify does: the signature over the index's digest by a trusted key, then each of the
// index's manifests against its digest, and says that nothing else was checked. Another key, no
// signature, a manifest that does not match its digest, and an index with too many entries are
// refused; provider flags are a usage error.
func TestVerifyImage(t *testing.T) {
	key, pub := keyPair(t, "k")
	_, otherPub := keyPair(t, "other")
	dir, index, entries := imageLayout(t, "1.2.3", 0, nil)
	signImage(t, dir, "1.2.3", key, index)
	repo := "oci-layout:" + dir

	var got struct {
		Verified   bool             `json:"verified"`
		Kind       string           `json:"kind"`
		Checked    string           `json:"checked"`
		Image      imageJSON        `json:"image"`
		Signatures []sign.Signature `json:"signatures"`
	}
	cliJSON(t, &got, "verify", repo+":1.2.3", "--key", pub)
	if !got.Verified || got.Kind != "image" || got.Image.Digest != index.Digest.String() || len(got.Signatures) != 1 ||
		!strings.Contains(got.Checked, "only its signatures and manifests") {
		t.Fatalf("verify: %+v", got)
	}
	if len(got.Image.Manifests) != 2 || got.Image.Manifests[0] != (imageManifest{Platform: "linux/amd64", Digest: entries[0].Digest.String()}) ||
		got.Image.Manifests[1] != (imageManifest{Platform: "linux/arm64", Digest: entries[1].Digest.String()}) {
		t.Fatalf("verify checked manifests %+v", got.Image.Manifests)
	}
	out, stderr, code := runCLI(t, "verify", repo+"@"+index.Digest.String(), "--key", pub)
	if code != 0 || !strings.Contains(out, "Verified image") || !strings.Contains(out, "not an OpenTofu provider or module") {
		t.Fatalf("verify by digest: exit %d\n%s%s", code, out, stderr)
	}

	if _, stderr, code := runCLI(t, "verify", repo+":1.2.3", "--key", otherPub); code != exitRefused || !strings.Contains(stderr, "none by a trusted key") {
		t.Errorf("another key: exit %d, %s", code, stderr)
	}
	unsigned, _, _ := imageLayout(t, "1.2.3", 0, nil)
	if _, stderr, code := runCLI(t, "verify", "oci-layout:"+unsigned+":1.2.3", "--key", pub); code != exitUnsigned || !strings.Contains(stderr, "not signed") {
		t.Errorf("unsigned: exit %d, %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "verify", repo+":1.2.3", "--key", pub, "--platform", "linux_amd64"); code != exitUsage || !strings.Contains(stderr, "not an OpenTofu provider or module") {
		t.Errorf("--platform: exit %d, %s", code, stderr)
	}

	// --kind: a script that asked for a provider is refused an image its signer also signed,
	// before any signature is checked; asking for an image passes.
	if _, stderr, code := runCLI(t, "verify", repo+":1.2.3", "--key", pub, "--kind", "provider"); code != exitRefused || !strings.Contains(stderr, "this is an image, not a provider") {
		t.Errorf("--kind provider on an image: exit %d, %s", code, stderr)
	}
	var refusal struct {
		Verified bool `json:"verified"`
		ExitCode int  `json:"exit_code"`
	}
	if out, _, code := runCLI(t, "verify", repo+":1.2.3", "--key", pub, "--kind", "module", "-o", "json"); code != exitRefused || json.Unmarshal([]byte(out), &refusal) != nil || refusal.Verified || refusal.ExitCode != exitRefused {
		t.Errorf("--kind module on an image, JSON: exit %d, %s", code, out)
	}
	if _, stderr, code := runCLI(t, "verify", repo+":1.2.3", "--key", pub, "--kind", "image"); code != 0 {
		t.Errorf("--kind image: exit %d, %s", code, stderr)
	}
	if _, stderr, code := runCLI(t, "verify", repo+":1.2.3", "--key", pub, "--kind", "chart"); code != exitUsage || !strings.Contains(stderr, "give provider, module or image") {
		t.Errorf("--kind chart: exit %d, %s", code, stderr)
	}

	t.Run("a manifest that does not match the signed index's digest", func(t *testing.T) {
		// A layout checks its own digests when opened: a registry serves what it likes, so the
		// target here serves other bytes, of the same size, for the arm64 manifest.
		tampered := entries[1].Digest
		var out, errb bytes.Buffer
		ios := &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb}
		ios.Factory.OpenTarget = func(ctx context.Context, ref oci.Ref, opts oci.Options, create bool) (oci.Target, error) {
			target, err := oci.NewClient(oci.Options{}).Open(ctx, ref, create)
			return lyingTarget{target, tampered}, err
		}
		code := run(context.Background(), ios, []string{"verify", repo + ":1.2.3", "--key", pub})
		if code == 0 || !strings.Contains(errb.String(), tampered.String()) {
			t.Errorf("exit %d\n%s%s", code, out.String(), errb.String())
		}
	})
	t.Run("an index listing too many manifests", func(t *testing.T) {
		dir, index, _ := imageLayout(t, "1.2.3", sign.MaxImageManifests, nil)
		signImage(t, dir, "1.2.3", key, index)
		if _, stderr, code := runCLI(t, "verify", "oci-layout:"+dir+":1.2.3", "--key", pub); code == 0 || !strings.Contains(stderr, "over the limit of 256") {
			t.Errorf("exit %d, %s", code, stderr)
		}
	})
	t.Run("a platform name holding a terminal escape", func(t *testing.T) {
		dir, index, _ := imageLayout(t, "1.2.3", 0, func(all []ocispec.Descriptor) {
			p := *all[1].Platform
			p.Architecture = "arm64\x1b[2K\rVerified"
			all[1].Platform = &p
		})
		signImage(t, dir, "1.2.3", key, index)
		out, stderr, code := runCLI(t, "verify", "oci-layout:"+dir+":1.2.3", "--key", pub)
		if code == 0 || !strings.Contains(stderr, "is not an OS, architecture and variant name") || strings.Contains(out+stderr, "\x1b") {
			t.Errorf("exit %d\n%q\n%q", code, out, stderr)
		}
	})
}
