package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testfix"
)

func TestPushLayout(t *testing.T) {
	ctx := context.Background()
	dist := packageHello(t)
	dir := filepath.Join(t.TempDir(), "hello")
	repo := "oci-layout:" + dir

	ios, out, _ := testIO()
	push := &pushOptions{io: ios, Sources: []string{dist}, Repo: repo, Concurrency: 2, output: textOut}
	if err := runPush(ctx, push); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"Pushed hello 1.0.0 (2 platforms) to " + repo + ":1.0.0\n", "\nDigest: sha256:", "already there.\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("push output lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "oci_mirror") || strings.Contains(text, "CLI configuration") {
		t.Errorf("a layout has no CLI configuration to print:\n%s", text)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		t.Fatalf("the push wrote no OCI layout: %v", err)
	}

	// Pushing the same release again uploads nothing and gives the same digest.
	ios, out, _ = testIO()
	push = &pushOptions{io: ios, Sources: []string{dist}, Repo: repo + ":1.0.0", Concurrency: 2, output: jsonOut}
	if err := runPush(ctx, push); err != nil {
		t.Fatal(err)
	}
	var pushed struct {
		Tag         string `json:"tag"`
		IndexDigest string `json:"index_digest"`
		Uploaded    int    `json:"uploaded"`
		Platforms   []struct {
			Platform string `json:"platform"`
			Zip      string `json:"zip_digest"`
			Filename string `json:"filename"`
		} `json:"platforms"`
	}
	decodeJSON(t, out, &pushed)
	if pushed.Uploaded != 0 || pushed.Tag != "1.0.0" || len(pushed.Platforms) != 2 || !strings.Contains(text, pushed.IndexDigest) {
		t.Errorf("second push: %+v", pushed)
	}
	for _, p := range pushed.Platforms {
		if want := fileDigest(t, filepath.Join(dist, p.Filename)); p.Zip != want {
			t.Errorf("%s: pushed zip digest %s, the file's is %s", p.Platform, p.Zip, want)
		}
	}
}

func TestInspectPullLayout(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	ios, out, _ := testIO()
	if err := runInspect(ctx, &inspectOptions{io: ios, Ref: repo, output: textOut}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "1.0.0\n" {
		t.Errorf("inspect %s: %q, want the one version", repo, out)
	}

	ios, out, _ = testIO()
	if err := runInspect(ctx, &inspectOptions{io: ios, Ref: repo + ":1.0.0", output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var inspected struct {
		Version     string `json:"version"`
		IndexDigest string `json:"index_digest"`
		Platforms   []struct {
			Platform string `json:"platform"`
			Zip      string `json:"zip_digest"`
			Filename string `json:"filename"`
		} `json:"platforms"`
	}
	decodeJSON(t, out, &inspected)
	if inspected.Version != "1.0.0" || inspected.IndexDigest != digest || len(inspected.Platforms) != 2 {
		t.Fatalf("inspect: %+v", inspected)
	}
	zips := map[string]string{}
	for i, want := range []string{"darwin_arm64", "linux_amd64"} {
		p := inspected.Platforms[i]
		if p.Platform != want || p.Filename != "terraform-provider-hello_1.0.0_"+want+".zip" {
			t.Errorf("inspect platform %d: %+v", i, p)
		}
		zips[p.Platform] = p.Zip
	}

	pulled := t.TempDir()
	ios, out, _ = testIO()
	pull := &pullOptions{io: ios, Ref: repo + ":1.0.0", Platforms: []string{"linux_amd64"}, OutDir: pulled, output: textOut}
	if err := runPull(ctx, pull); err != nil {
		t.Fatal(err)
	}
	zip := filepath.Join(pulled, "terraform-provider-hello_1.0.0_linux_amd64.zip")
	if want := "Pulled " + repo + ":1.0.0 (" + digest + ")\n  linux_amd64    " + zip + "\nChecked: the index, manifest and zip digests. Not checked: signatures ('oprov verify " + repo + ":1.0.0 --key KEY.pub' checks them).\n"; out.String() != want {
		t.Errorf("pull output %q, want %q", out, want)
	}
	if got := fileDigest(t, zip); got != zips["linux_amd64"] {
		t.Errorf("the pulled zip's digest is %s, the index says %s", got, zips["linux_amd64"])
	}
	if _, err := os.Stat(filepath.Join(pulled, "terraform-provider-hello_1.0.0_darwin_arm64.zip")); err == nil {
		t.Error("pull --platform linux_amd64 also wrote darwin_arm64")
	}
}

// fileDigest is a file's sha256 digest as OCI writes it.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

func TestPushTagMustBeTheVersion(t *testing.T) {
	ctx := context.Background()
	dist := packageHello(t)
	dir := filepath.Join(t.TempDir(), "layout")
	ios, _, _ := testIO()
	o := &pushOptions{io: ios, Sources: []string{dist}, Repo: "oci-layout:" + dir + ":2.0.0", output: textOut}
	wantErrorContaining(t, runPush(ctx, o), "the tag says version 2.0.0 but the zips are version 1.0.0")
	o.Repo = "oci-layout:" + dir + ":latest"
	wantErrorContaining(t, runPush(ctx, o), "the tag must be the release's version (1.0.0)")
	o.Repo = "oci-layout:" + dir + "@sha256:" + strings.Repeat("0", 64)
	wantUsageError(t, runPush(ctx, o), "push to a tag, not a digest (the tag is the version, 1.0.0)")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused push created the layout: %v", err)
	}
}

func TestPushErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	layout := "oci-layout:" + t.TempDir()
	wantUsageError(t, runPush(ctx, &pushOptions{io: ios, Sources: []string{"dist"}, Repo: layout, Key: "k.key", output: textOut}), "--key and the keyless signing flags go with --sign")
	wantUsageError(t, runPush(ctx, &pushOptions{io: ios, Sources: []string{"dist"}, Repo: layout, Address: "x", output: textOut}), "--address")
	wantUsageError(t, runPush(ctx, &pushOptions{io: ios, Sources: []string{"dist"}, Repo: "nohost", output: textOut}), "HOST[:PORT]/PATH")
	wantUsageError(t, runPush(ctx, &pushOptions{io: ios, Sources: []string{"dist"}, Repo: layout, output: outputFlag{Format: "yaml"}}), `-o "yaml": -o/--output is the output format, text or json`)

	// A wrong key password stops the push before anything is read or written.
	key, _ := keyPair(t, "k")
	t.Setenv("COSIGN_PASSWORD", "wrong")
	dir := filepath.Join(t.TempDir(), "never")
	err := runPush(ctx, &pushOptions{io: ios, Sources: []string{"no-such-dist"}, Repo: "oci-layout:" + dir, Sign: true, Key: key, output: textOut})
	wantErrorContaining(t, err, "cannot decrypt it (wrong COSIGN_PASSWORD?)")
	if strings.Contains(err.Error(), "no-such-dist") {
		t.Errorf("the release was read before the key: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a push with a bad key created the layout: %v", err)
	}
}

func TestPushAndSign(t *testing.T) {
	ctx := context.Background()
	key, pub := keyPair(t, "k")
	dist := packageHello(t)
	repo := "oci-layout:" + filepath.Join(t.TempDir(), "hello")
	ios, out, _ := testIO()
	o := &pushOptions{io: ios, Sources: []string{dist}, Repo: repo, Sign: true, Key: key, output: textOut}
	if err := runPush(ctx, o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nSigned: sha256:") || !strings.Contains(out.String(), "(bundle)\n") {
		t.Errorf("push --sign output:\n%s", out)
	}
	ios, out, _ = testIO()
	v := &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{pub}, output: textOut}
	if err := runVerify(ctx, v); err != nil {
		t.Fatalf("verify after push --sign: %v", err)
	}
	if !strings.HasPrefix(out.String(), "Verified "+repo+":1.0.0 (sha256:") {
		t.Errorf("verify output:\n%s", out)
	}
}

func TestInspectErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	wantErrorContaining(t, runInspect(ctx, &inspectOptions{io: ios, Ref: "oci-layout:" + filepath.Join(t.TempDir(), "missing"), output: textOut}), "not an OCI image layout")
	repo, _ := pushedLayout(t)
	wantErrorContaining(t, runInspect(ctx, &inspectOptions{io: ios, Ref: repo + ":9.9.9", output: textOut}), "9.9.9 not found in "+repo)
	wantUsageError(t, runPull(ctx, &pullOptions{io: ios, Ref: repo, output: textOut}), "name a version")
	err := runPull(ctx, &pullOptions{io: ios, Ref: repo + ":1.0.0", Platforms: []string{"windows_amd64"}, OutDir: t.TempDir(), output: textOut})
	wantErrorContaining(t, err, "has no windows_amd64 package")
}

// TestPushPlainHTTPPrintsNoCLIConfig: OpenTofu's oci_mirror speaks only HTTPS, so a push over
// plain HTTP prints no CLI configuration (which could not work), only the warning that says why.
func TestPushPlainHTTPPrintsNoCLIConfig(t *testing.T) {
	dist := packageHello(t)
	reg := testfix.StartRegistry(t)
	stdout, stderr, code := runCLI(t, "push", dist, reg.Host+"/providers/acme/hello", "--plain-http", "--registry-config", reg.Options.RegistryConfig)
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	if strings.Contains(stdout, "oci_mirror") || strings.Contains(stdout, "CLI configuration") {
		t.Errorf("a plain-HTTP push printed a CLI configuration OpenTofu cannot use:\n%s", stdout)
	}
	if !strings.Contains(stderr, "plain HTTP") || !strings.Contains(stderr, "serve the registry over TLS") {
		t.Errorf("no warning that OpenTofu cannot install from there: %q", stderr)
	}
	stdout, _, _ = runCLI(t, "push", dist, reg.Host+"/providers/acme/hello", "--plain-http", "--registry-config", reg.Options.RegistryConfig, "-o", "json")
	if strings.Contains(stdout, `"tofurc"`) {
		t.Errorf("-o json carries a CLI configuration that cannot work:\n%s", stdout)
	}
}
