package main

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
)

func writeModule(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "network")
	for name, body := range map[string]string{
		"main.tf":                "module \"sub\" {\n  source = \"./modules/sub\"\n}\noutput \"x\" { value = module.sub.y }\n",
		"modules/sub/main.tf":    "output \"y\" { value = \"hello\" }\n",
		".terraform/junk":        "x",
		".git/config":            "[core]\n",
		"modules/sub/.hidden.tf": "# dot-files stay out",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func cliJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, stderr, code := runCLI(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("oprov %s: exit %d: %s", strings.Join(args, " "), code, stderr)
	}
	if err := json.NewDecoder(bytes.NewBufferString(out)).Decode(v); err != nil {
		t.Fatalf("oprov %s: not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

type moduleOut struct {
	Path     string `json:"path"`
	Manifest string `json:"manifest_digest"`
	Zip      string `json:"zip_digest"`
	H1       string `json:"h1"`
	ZH       string `json:"zh"`
	Source   string `json:"tofu_source"`
}

func TestModulePackagePushSignVerifyInspect(t *testing.T) {
	dir := writeModule(t)
	key, pub := keyPair(t, "mod")
	_, otherPub := keyPair(t, "other")
	var a, b moduleOut
	cliJSON(t, &a, "package", "--module", dir, "--version", "1.0.0", "--out-dir", filepath.Join(t.TempDir(), "a"))
	cliJSON(t, &b, "package", "--module", dir, "--version", "1.0.0", "--out-dir", filepath.Join(t.TempDir(), "b"))
	if a.Manifest == "" || a.Manifest != b.Manifest || a.ZH != b.ZH {
		t.Fatalf("packaging twice gave %s and %s", a.Manifest, b.Manifest)
	}
	if filepath.Base(a.Path) != "network_1.0.0.zip" {
		t.Errorf("package wrote %s", a.Path)
	}
	repo := "oci-layout:" + filepath.Join(t.TempDir(), "layout")
	var pushed moduleOut
	cliJSON(t, &pushed, "push", "--module", dir, repo+":1.0.0", "--sign", "--key", key)
	if pushed.Manifest != a.Manifest {
		t.Fatalf("push gave manifest %s, package said %s", pushed.Manifest, a.Manifest)
	}
	// The packaged zip pushes to the same digest.
	var again moduleOut
	cliJSON(t, &again, "push", "--module", a.Path, repo+":1.0.0")
	if again.Manifest != a.Manifest {
		t.Fatalf("pushing the packaged zip gave %s, want %s", again.Manifest, a.Manifest)
	}
	var ver struct {
		Verified bool      `json:"verified"`
		Kind     string    `json:"kind"`
		Module   moduleOut `json:"module"`
	}
	cliJSON(t, &ver, "verify", repo+":1.0.0", "--key", pub)
	if !ver.Verified || ver.Kind != "module" || ver.Module.H1 != a.H1 || ver.Module.Zip != a.Zip {
		t.Fatalf("verify: %+v, want the packaged module %+v", ver, a)
	}
	_, stderr, code := runCLI(t, "verify", repo+":1.0.0", "--key", otherPub)
	if code != exitRefused || !strings.Contains(stderr, "none by a trusted key") {
		t.Fatalf("verify with another key: exit %d, %s", code, stderr)
	}
	var ins struct {
		Kind        string            `json:"kind"`
		H1          string            `json:"h1"`
		Annotations map[string]string `json:"annotations"`
	}
	cliJSON(t, &ins, "inspect", repo+":1.0.0")
	if ins.Kind != "module" || ins.H1 != a.H1 || ins.Annotations["org.opencontainers.image.version"] != "1.0.0" {
		t.Fatalf("inspect: %+v", ins)
	}
	// Unsigned: a second version pushed without --sign is refused.
	cliJSON(t, &again, "push", "--module", dir, repo+":1.1.0")
	if _, stderr, code := runCLI(t, "verify", repo+":1.1.0", "--key", pub); code != exitUnsigned || !strings.Contains(stderr, "not signed") {
		t.Fatalf("verify of an unsigned module: exit %d, %s", code, stderr)
	}
	// sign signs a module's manifest; then it verifies.
	if _, stderr, code := runCLI(t, "sign", repo+":1.1.0", "--key", key); code != 0 {
		t.Fatalf("sign a module: %s", stderr)
	}
	if _, stderr, code := runCLI(t, "verify", repo+":1.1.0", "--key", pub, "--no-zips"); code != 0 {
		t.Fatalf("verify a module signed with 'oprov sign': %s", stderr)
	}
}

func TestModuleUsageErrors(t *testing.T) {
	dir := writeModule(t)
	repo := "oci-layout:" + filepath.Join(t.TempDir(), "layout")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"push", "--module", dir, repo}, "say which version"},
		{[]string{"push", "--module", dir, repo + ":latest"}, "is not a version"},
		{[]string{"push", "--module", dir, repo + ":1.0.0", "--version", "2.0.0"}, "--version says 2.0.0"},
		{[]string{"push", "--module", dir, "dist", repo + ":1.0.0"}, "give only the repository"},
		{[]string{"package", "--module", dir, "--go", "."}, "give no provider flags"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("oprov %s: exit %d, %q; want a usage error saying %q", strings.Join(c.args, " "), code, stderr, c.want)
		}
	}
	if _, stderr, code := runCLI(t, "package", "--module", filepath.Join(dir, "main.tf")); code != 1 || !strings.Contains(stderr, "not a directory") {
		t.Errorf("package --module FILE: exit %d, %q", code, stderr)
	}
	// A zip that escapes its directory is refused before anything is pushed.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("../escape.tf")
	w.Write([]byte("# out"))
	zw.Close()
	evil := filepath.Join(t.TempDir(), "evil.zip")
	os.WriteFile(evil, buf.Bytes(), 0o644)
	layout := filepath.Join(t.TempDir(), "never")
	if _, stderr, code := runCLI(t, "push", "--module", evil, "oci-layout:"+layout+":1.0.0"); code != 1 || !strings.Contains(stderr, "path traversal") {
		t.Errorf("push --module of a zip with ../: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(layout); err == nil {
		t.Error("a refused module zip created the layout")
	}
}

// TestModuleMovedTagRefused: a tag moved onto another version's signed manifest does not verify:
// the signed manifest names its version, and the tag says another.
func TestModuleMovedTagRefused(t *testing.T) {
	dir := writeModule(t)
	key, pub := keyPair(t, "mod")
	layout := filepath.Join(t.TempDir(), "layout")
	repo := "oci-layout:" + layout
	var pushed moduleOut
	cliJSON(t, &pushed, "push", "--module", dir, repo+":1.0.0", "--sign", "--key", key)
	ref, err := oci.ParseRef(repo)
	if err != nil {
		t.Fatal(err)
	}
	target, err := oci.NewClient(oci.Options{}).Open(context.Background(), ref, false)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := target.Resolve(context.Background(), "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := target.Tag(context.Background(), desc, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCLI(t, "verify", repo+":2.0.0", "--key", pub)
	if code != exitRefused || !strings.Contains(stderr, "the tag says version 2.0.0 but the signed index is version 1.0.0") {
		t.Fatalf("verify of a moved tag: exit %d, %s", code, stderr)
	}
}

func TestModuleBlock(t *testing.T) {
	got := string(moduleBlock("oci://127.0.0.1:5000/modules/net?tag=1.0.0"))
	want := "module \"NAME\" {\n  source = \"oci://127.0.0.1:5000/modules/net?tag=1.0.0\"\n}\n"
	if got != want {
		t.Errorf("module block:\n%s\nwant:\n%s", got, want)
	}
}
