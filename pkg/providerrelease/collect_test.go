package providerrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/pkghash"
)

func TestPackageBinariesAndCollect(t *testing.T) {
	bin := t.TempDir()
	for _, p := range []string{"linux_amd64", "windows_amd64"} {
		exe := "terraform-provider-demo"
		if strings.HasPrefix(p, "windows") {
			exe += ".exe"
		}
		os.MkdirAll(filepath.Join(bin, p), 0o755)
		os.WriteFile(filepath.Join(bin, p, exe), []byte("binary for "+p), 0o755)
		os.WriteFile(filepath.Join(bin, p, "LICENSE"), []byte("MIT"), 0o644)
	}
	out := t.TempDir()
	p, err := PackageBinaries(bin, PackageOptions{Type: "demo", Version: "0.1.0", OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Release.Artifacts) != 2 {
		t.Fatalf("artifacts: %+v", p.Release.Artifacts)
	}
	rel, err := Collect(context.Background(), []string{out})
	if err != nil {
		t.Fatal(err)
	}
	if rel.Type != "demo" || rel.Version != "0.1.0" || rel.SumsPath == "" || len(rel.Artifacts) != 2 {
		t.Fatalf("collected %+v", rel)
	}
	for i, a := range rel.Artifacts {
		if a.Digest != p.Release.Artifacts[i].Digest || a.H1 != p.Hashes[a.Name.Platform].H1 {
			t.Errorf("%s: collect hashed %s %s, package wrote %s %s", a.Name, a.Digest, a.H1, p.Release.Artifacts[i].Digest, p.Hashes[a.Name.Platform].H1)
		}
		data, _ := os.ReadFile(a.Path)
		sum := sha256.Sum256(data)
		h1, err := pkghash.ZipH1(context.Background(), a.Path)
		if h := (pkghash.Hashes{ZH: pkghash.ZH(hex.EncodeToString(sum[:])), H1: h1}); err != nil || h != p.Hashes[a.Name.Platform] {
			t.Errorf("%s: the zip hashes to %+v, package printed %+v (%v)", a.Name, h, p.Hashes[a.Name.Platform], err)
		}
	}
	if rel.Artifacts[1].Executable != "terraform-provider-demo_v0.1.0.exe" {
		t.Errorf("windows executable: %q", rel.Artifacts[1].Executable)
	}
	// Packaging again gives identical bytes.
	out2 := t.TempDir()
	p2, err := PackageBinaries(bin, PackageOptions{Type: "demo", Version: "0.1.0", OutDir: out2})
	if err != nil || p2.Release.Artifacts[0].Digest != p.Release.Artifacts[0].Digest {
		t.Errorf("repackaging changed the digest (%v)", err)
	}
	// The SHA256SUMS file alone names the release.
	rel2, err := Collect(context.Background(), []string{rel.SumsPath})
	if err != nil || len(rel2.Artifacts) != 2 {
		t.Errorf("collect from SHA256SUMS: %+v, %v", rel2, err)
	}
	// An interrupted command stops hashing.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Collect(done, []string{out}); !errors.Is(err, context.Canceled) {
		t.Errorf("collect with its context done: %v", err)
	}
	// Nothing but the outputs is left behind: no temporary files.
	entries, _ := os.ReadDir(out)
	if len(entries) != 3 {
		t.Errorf("output directory holds %d entries, want 2 zips and SHA256SUMS", len(entries))
	}
}
