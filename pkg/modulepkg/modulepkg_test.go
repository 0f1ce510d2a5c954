package modulepkg

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/content/oci"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/pkghash"
)

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func moduleTree(t *testing.T) string {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"main.tf":                         `module "sub" { source = "./modules/sub" }`,
		"outputs.tf":                      `output "x" { value = module.sub.y }`,
		"modules/sub/main.tf":             `output "y" { value = "hello" }`,
		"scripts/run.sh":                  "#!/bin/sh\necho hi\n",
		".terraform/modules/modules.json": "{}",
		".git/HEAD":                       "ref: refs/heads/main\n",
		".terraform.lock.hcl":             "# lock\n",
		"modules/sub/.hidden":             "x",
	})
	if err := os.Chmod(filepath.Join(dir, "scripts/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func entries(t *testing.T, data []byte) map[string]*zip.File {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*zip.File{}
	for _, f := range zr.File {
		out[f.Name] = f
	}
	return out
}

func TestZipIsDeterministicAndKeepsSubdirectories(t *testing.T) {
	dir := moduleTree(t)
	a, err := Zip(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The same tree elsewhere, written in another order with other times, zips to the same bytes.
	other := moduleTree(t)
	later := time.Now().Add(48 * time.Hour)
	filepath.Walk(other, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, later, later) })
	b, err := Zip(other)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("the same module tree zipped to different bytes (%d and %d bytes)", len(a), len(b))
	}
	got := entries(t, a)
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	want := "main.tf modules/sub/main.tf outputs.tf scripts/run.sh"
	if strings.Join(names, " ") != want {
		t.Fatalf("zip holds %v, want %s (dot-entries out, subdirectories kept)", names, want)
	}
	if m := got["scripts/run.sh"].Mode(); m.Perm() != 0o755 {
		t.Errorf("executable kept mode %v, want 0755", m)
	}
	if m := got["main.tf"].Mode(); m.Perm() != 0o644 {
		t.Errorf("main.tf has mode %v, want 0644", m)
	}
	// A change to a file changes the bytes.
	write(t, other, map[string]string{"modules/sub/main.tf": `output "y" { value = "bye" }`})
	if c, _ := Zip(other); bytes.Equal(a, c) {
		t.Fatal("a changed file gave the same zip")
	}
}

func TestZipRefusesLinksOutsideAndEmptyTrees(t *testing.T) {
	dir := t.TempDir()
	if _, err := Zip(dir); err == nil || !strings.Contains(err.Error(), "no files") {
		t.Fatalf("an empty module: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("s"), 0o644)
	write(t, dir, map[string]string{"main.tf": "", "inside.tf": "# in"})
	os.Symlink("inside.tf", filepath.Join(dir, "alias.tf"))
	got, err := Zip(dir)
	if err != nil {
		t.Fatalf("a link inside the module: %v", err)
	}
	if f := entries(t, got)["alias.tf"]; f == nil || !f.Mode().IsRegular() {
		t.Fatal("a link to a file inside the module is not zipped as that file")
	}
	os.Symlink(outside, filepath.Join(dir, "leak.tf"))
	if _, err := Zip(dir); err == nil || !strings.Contains(err.Error(), "outside the module") {
		t.Fatalf("a link leading outside the module: %v", err)
	}
	if _, err := Zip(filepath.Join(dir, "main.tf")); err == nil {
		t.Fatal("a file given as the module directory was zipped")
	}
}

func TestHashes(t *testing.T) {
	data, err := Zip(moduleTree(t))
	if err != nil {
		t.Fatal(err)
	}
	h1, zh, err := Hashes(data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if zh != "zh:"+hex.EncodeToString(sum[:]) {
		t.Errorf("zh = %s", zh)
	}
	p := filepath.Join(t.TempDir(), "m.zip")
	os.WriteFile(p, data, 0o644)
	want, err := pkghash.ZipH1(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if h1 != want || !manifest.ValidH1(h1) {
		t.Errorf("h1 = %s, pkghash gives %s", h1, want)
	}
	// The h1 of a zip is the h1 of what it unpacks to.
	dest := filepath.Join(t.TempDir(), "m")
	if err := Unpack(data, dest); err != nil {
		t.Fatal(err)
	}
	again, err := Zip(dest)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := Hashes(again); h != h1 {
		t.Errorf("unpacked and zipped again: h1 %s, want %s", h, h1)
	}
	if _, _, err := Hashes([]byte("not a zip")); err == nil {
		t.Error("Hashes of garbage gave no error")
	}
}

type entry struct {
	name string
	mode os.FileMode
	body []byte
}

func rawZip(t testing.TB, es ...entry) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		h.SetMode(e.mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.body)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUnpackRefusesUnsafeZips(t *testing.T) {
	ok := entry{"main.tf", 0o644, []byte("# ok")}
	cases := map[string]struct {
		zip  []byte
		want string
	}{
		"traversal":      {rawZip(t, ok, entry{"../evil.tf", 0o644, []byte("x")}), "outside"},
		"deep traversal": {rawZip(t, ok, entry{"a/../../evil.tf", 0o644, []byte("x")}), "outside"},
		"absolute":       {rawZip(t, ok, entry{"/etc/evil.tf", 0o644, []byte("x")}), "absolute"},
		"symlink":        {rawZip(t, ok, entry{"link.tf", os.ModeSymlink | 0o777, []byte("/etc/passwd")}), "symbolic link"},
		"duplicate":      {rawZip(t, ok, ok), "twice"},
		"bomb":           {rawZip(t, ok, entry{"big.tf", 0o644, make([]byte, 8<<20)}), "zip bomb"},
		"garbage":        {[]byte("PK\x03\x04 not really"), "not a valid zip"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "m")
			err := Unpack(c.zip, dest)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Unpack = %v, want an error with %q", err, c.want)
			}
			left, _ := os.ReadDir(parent)
			if len(left) != 0 {
				t.Fatalf("a refused zip left %d entries beside dest (%s)", len(left), left[0].Name())
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(parent), "evil.tf")); err == nil {
				t.Fatal("a refused zip wrote outside dest")
			}
		})
	}
}

func TestUnpackRefusesTooManyFilesAndAnExistingDest(t *testing.T) {
	es := make([]entry, DefaultLimits.MaxFiles+1)
	for i := range es {
		es[i] = entry{name: "f" + strings.Repeat("x", i%7) + "/" + digest.FromBytes([]byte{byte(i), byte(i >> 8)}).Encoded()[:12] + ".tf", mode: 0o644}
	}
	dest := filepath.Join(t.TempDir(), "m")
	if err := Unpack(rawZip(t, es...), dest); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Fatalf("a zip of %d entries: %v", len(es), err)
	}
	os.Mkdir(dest, 0o755)
	if err := Unpack(rawZip(t, entry{"main.tf", 0o644, nil}), dest); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("unpacking over an existing dest: %v", err)
	}
}

func TestPushFetchRoundTrip(t *testing.T) {
	ctx := context.Background()
	data, err := Zip(moduleTree(t))
	if err != nil {
		t.Fatal(err)
	}
	ann := map[string]string{AnnotationSource: "example.com/ns/name/system", AnnotationVersion: "1.0.0", ocispec.AnnotationVersion: "1.0.0"}
	store, err := oci.New(t.TempDir()) // an OCI layout: it resolves digests as registries do
	if err != nil {
		t.Fatal(err)
	}
	d1, err := Push(ctx, store, data, "1.0.0", ann)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := Push(ctx, store, data, "1.0.0", ann)
	if err != nil || d1.Digest != d2.Digest {
		t.Fatalf("pushing the same package twice: %v, %s then %s", err, d1.Digest, d2.Digest)
	}
	for _, ref := range []string{"1.0.0", d1.Digest.String()} {
		got, err := Fetch(ctx, store, ref, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Zip, data) || got.Manifest.Digest != d1.Digest || got.Annotations[AnnotationSource] != ann[AnnotationSource] {
			t.Fatalf("fetched %s: %+v", ref, got.Manifest)
		}
		if got.Manifest.ArtifactType != manifest.ArtifactTypeModule {
			t.Fatalf("fetched descriptor has artifactType %q", got.Manifest.ArtifactType)
		}
	}
	if _, err := Fetch(ctx, store, "1.0.0", int64(len(data)-1)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a zip over maxBytes: %v", err)
	}
	// Other annotations, another manifest: the digest names the provenance too.
	d3, _ := Push(ctx, store, data, "", map[string]string{AnnotationVersion: "2.0.0"})
	if d3.Digest == d1.Digest {
		t.Fatal("other annotations gave the same manifest digest")
	}
}

// pushManifest stores an arbitrary manifest (and blobs) under tag.
func pushManifest(t *testing.T, store *memory.Store, mediaType string, m any, tag string, blobs ...[]byte) {
	t.Helper()
	ctx := context.Background()
	for _, b := range blobs {
		d := content.NewDescriptorFromBytes("application/octet-stream", b)
		if ok, _ := store.Exists(ctx, d); !ok {
			if err := store.Push(ctx, d, bytes.NewReader(b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	data, _ := json.Marshal(m)
	d := content.NewDescriptorFromBytes(mediaType, data)
	if err := store.Push(ctx, d, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := store.Tag(ctx, d, tag); err != nil {
		t.Fatal(err)
	}
}

func TestFetchRefusesWhatIsNotAModulePackage(t *testing.T) {
	ctx := context.Background()
	zipData := rawZip(t, entry{"main.tf", 0o644, []byte("# m")})
	layer := LayerDescriptor(zipData)
	store := memory.New()
	base := func() ocispec.Manifest {
		return ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			ArtifactType: manifest.ArtifactTypeModule, Config: manifest.EmptyConfig, Layers: []ocispec.Descriptor{layer}}
	}
	wrongType := base()
	wrongType.ArtifactType = "application/vnd.example.other"
	pushManifest(t, store, ocispec.MediaTypeImageManifest, wrongType, "wrongtype", zipData, manifest.EmptyConfigData)
	two := base()
	two.Layers = append(two.Layers, layer)
	pushManifest(t, store, ocispec.MediaTypeImageManifest, two, "twolayers")
	tarLayer := base()
	tarLayer.Layers = []ocispec.Descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layer.Digest, Size: layer.Size}}
	pushManifest(t, store, ocispec.MediaTypeImageManifest, tarLayer, "tar")
	idx := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		ArtifactType: manifest.ArtifactTypeProvider, Manifests: []ocispec.Descriptor{}}
	pushManifest(t, store, ocispec.MediaTypeImageIndex, idx, "index")
	// The layer's descriptor names other bytes than the registry serves.
	lying := base()
	other := rawZip(t, entry{"main.tf", 0o644, []byte("# other")})
	lying.Layers = []ocispec.Descriptor{{MediaType: manifest.MediaTypeZip, Digest: digest.FromBytes(other), Size: int64(len(zipData))}}
	pushManifest(t, store, ocispec.MediaTypeImageManifest, lying, "lying")
	cases := map[string]string{
		"wrongtype": "not an OpenTofu module package",
		"twolayers": "2 layers",
		"tar":       "media type",
		"index":     "index",
		"lying":     "digest",
	}
	target := &swapping{Store: store, from: digest.FromBytes(other), to: zipData}
	for tag, want := range cases {
		_, err := Fetch(ctx, target, tag, 1<<20)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Fetch = %v, want an error with %q", tag, err, want)
		}
	}
}

// swapping is a registry that serves other bytes for one digest.
type swapping struct {
	*memory.Store
	from digest.Digest
	to   []byte
}

func (s *swapping) Fetch(ctx context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	if d.Digest == s.from {
		return io.NopCloser(bytes.NewReader(s.to)), nil
	}
	return s.Store.Fetch(ctx, d)
}
