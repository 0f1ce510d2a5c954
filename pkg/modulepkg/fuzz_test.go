package modulepkg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
)

// FuzzParseManifest: whatever a registry sends, parseManifest never panics, and what it accepts
// is a module package with one zip layer.
func FuzzParseManifest(f *testing.F) {
	_, good, err := Build([]byte("PK"), map[string]string{AnnotationSource: "a/b/c"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`))
	f.Add([]byte(`{"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.opentofu.modulepkg","layers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			return
		}
		if m.ArtifactType != manifest.ArtifactTypeModule || len(m.Layers) != 1 || m.Layers[0].MediaType != manifest.MediaTypeZip {
			t.Fatalf("accepted a manifest that is not a module package: %+v", m)
		}
	})
}

// FuzzUnpack: whatever zip it is given, Unpack either writes everything under dest or nothing at
// all, and never anything beside it.
func FuzzUnpack(f *testing.F) {
	f.Add(rawZip(f, entry{"main.tf", 0o644, []byte("# m")}, entry{"modules/a/main.tf", 0o644, nil}))
	f.Add(rawZip(f, entry{"../x", 0o644, []byte("x")}))
	f.Add(rawZip(f, entry{"a", 0o644, nil}, entry{"a/b", 0o644, nil}))
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "m")
		err := Unpack(data, dest)
		left, _ := os.ReadDir(parent)
		if err != nil {
			if len(left) != 0 {
				t.Fatalf("a refused zip left %s", left[0].Name())
			}
			return
		}
		if len(left) != 1 || left[0].Name() != "m" {
			t.Fatalf("Unpack wrote beside dest: %v", left)
		}
		filepath.Walk(dest, func(p string, info os.FileInfo, err error) error {
			if err == nil && info.Mode()&os.ModeSymlink != 0 {
				t.Fatalf("Unpack wrote a symbolic link %s", p)
			}
			if !strings.HasPrefix(p, dest) {
				t.Fatalf("Unpack wrote %s outside dest", p)
			}
			return nil
		})
		if _, _, err := Hashes(data); err != nil {
			t.Fatalf("Unpack accepted a zip Hashes refuses: %v", err)
		}
	})
}
