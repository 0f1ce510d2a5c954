package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

type pushOutput struct {
	Reference   string `json:"reference"`
	Version     string `json:"version"`
	IndexDigest string `json:"index_digest"`
	Platforms   []struct {
		Platform string `json:"platform"`
		Manifest string `json:"manifest_digest"`
		Zip      string `json:"zip_digest"`
		Size     int64  `json:"size"`
		Filename string `json:"filename"`
	} `json:"platforms"`
	Uploaded int    `json:"uploaded"`
	Skipped  int    `json:"skipped"`
	TofuRC   string `json:"tofurc"`
}

func pushJSON(t testing.TB, env []string, args ...string) pushOutput {
	t.Helper()
	r := mustOprov(t, env, append([]string{"push", "-o", "json"}, args...)...)
	var out pushOutput
	decodeJSON(t, r.Stdout, &out)
	return out
}

// TestPushThenTofuInit is the proof: package examples/hello, push it to a TLS registry on
// 127.0.0.1, and have the real tofu install it through oci_mirror and apply a configuration.
func TestPushThenTofuInit(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	dist := helloRelease(t)
	repo := reg.Host + "/providers/acme/hello"

	first := pushJSON(t, nil, dist, repo, "--ca-file", reg.CAFile, "--address", "example.com/acme/hello")
	if len(first.Platforms) != len(helloPlatforms) {
		t.Fatalf("pushed %d platforms, want %d", len(first.Platforms), len(helloPlatforms))
	}
	// Each platform: a zip and a manifest; plus the shared empty config and the index.
	if want := 2*len(helloPlatforms) + 2; first.Uploaded != want {
		t.Errorf("first push uploaded %d items, want %d", first.Uploaded, want)
	}

	t.Run("re-push uploads nothing", func(t *testing.T) {
		again := pushJSON(t, nil, dist, repo+":1.0.0", "--ca-file", reg.CAFile)
		if again.IndexDigest != first.IndexDigest {
			t.Errorf("re-push gave index %s, first push %s", again.IndexDigest, first.IndexDigest)
		}
		if again.Uploaded != 0 {
			t.Errorf("re-push uploaded %d items, want 0", again.Uploaded)
		}
	})

	t.Run("SSL_CERT_FILE instead of --ca-file", func(t *testing.T) {
		mustOprov(t, []string{"SSL_CERT_FILE=" + reg.CAFile}, "inspect", repo)
		r := oprov(t, []string{"SSL_CERT_FILE=/dev/null"}, "inspect", repo)
		if r.Code != 3 || !strings.Contains(r.Stderr, "--ca-file") {
			t.Errorf("untrusted TLS registry: exit %d, stderr %q; want exit 3 (could not check) naming --ca-file", r.Code, r.Stderr)
		}
	})

	t.Run("oci layout gives the same digests", func(t *testing.T) {
		layoutGivesSameDigests(t, dist, first)
	})

	t.Run("inspect and pull", func(t *testing.T) {
		inspectAndPull(t, reg, dist, repo, first)
	})

	t.Run("tofu init and apply through oci_mirror", func(t *testing.T) {
		tofuLocksPushedZip(t, reg, first)
	})
}

// layoutGivesSameDigests: pushing the release to an OCI layout gives the registry push's digests,
// and the layout's index.json tags the version.
func layoutGivesSameDigests(t *testing.T, dist string, first pushOutput) {
	layout := filepath.Join(t.TempDir(), "layout")
	lay := pushJSON(t, nil, dist, "oci-layout:"+layout)
	if lay.IndexDigest != first.IndexDigest {
		t.Errorf("layout index %s, registry index %s", lay.IndexDigest, first.IndexDigest)
	}
	for i := range lay.Platforms {
		if lay.Platforms[i] != first.Platforms[i] {
			t.Errorf("platform %d: layout %+v, registry %+v", i, lay.Platforms[i], first.Platforms[i])
		}
	}
	// The layout's index.json tags the version.
	idx, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(idx), first.IndexDigest) || !strings.Contains(string(idx), `"1.0.0"`) {
		t.Errorf("layout index.json does not tag %s as 1.0.0:\n%s", first.IndexDigest, idx)
	}
}

// inspectAndPull: inspect lists the pushed version and its platforms; pull gives back the pushed
// zip, which can be pushed again as it is.
func inspectAndPull(t *testing.T, reg *testreg.Registry, dist, repo string, first pushOutput) {
	r := mustOprov(t, nil, "inspect", repo, "--ca-file", reg.CAFile, "-o", "json")
	var versions struct {
		Versions []struct{ Version string } `json:"versions"`
	}
	decodeJSON(t, r.Stdout, &versions)
	if len(versions.Versions) != 1 || versions.Versions[0].Version != "1.0.0" {
		t.Errorf("inspect versions: %s", r.Stdout)
	}
	r = mustOprov(t, nil, "inspect", repo+":1.0.0", "--ca-file", reg.CAFile, "-o", "json")
	var one struct {
		IndexDigest string `json:"index_digest"`
		Platforms   []json.RawMessage
	}
	decodeJSON(t, r.Stdout, &one)
	if one.IndexDigest != first.IndexDigest || len(one.Platforms) != len(helloPlatforms) {
		t.Errorf("inspect 1.0.0: %s", r.Stdout)
	}
	out := t.TempDir()
	mustOprov(t, nil, "pull", repo+":1.0.0", "--ca-file", reg.CAFile, "--platform", helloPlatforms[0], "--out-dir", out)
	name := "terraform-provider-hello_1.0.0_" + helloPlatforms[0] + ".zip"
	got, err := os.ReadFile(filepath.Join(out, name))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("pulled %s differs from the pushed one", name)
	}
	// What pull writes can be pushed again as it is, giving the same platform manifest.
	lay := pushJSON(t, nil, out, "oci-layout:"+filepath.Join(t.TempDir(), "l"))
	for _, p := range first.Platforms {
		if p.Platform == helloPlatforms[0] && p.Manifest != lay.Platforms[0].Manifest {
			t.Errorf("re-pushing a pulled zip gave manifest %s, want %s", lay.Platforms[0].Manifest, p.Manifest)
		}
	}
}

// tofuLocksPushedZip: tofu installs the pushed release through oci_mirror, and its lock records
// the pushed zip's zh: and the h1: oprov package printed.
func tofuLocksPushedZip(t *testing.T, reg *testreg.Registry, first pushOutput) {
	cfg := tofuApplyHello(t, first.TofuRC, reg.CAFile)
	host := runtime.GOOS + "_" + runtime.GOARCH
	var zipDigest string
	for _, p := range first.Platforms {
		if p.Platform == host {
			zipDigest = p.Zip
		}
	}
	hashes := lockHashes(t, filepath.Join(cfg, ".terraform.lock.hcl"), "example.com/acme/hello")
	if want := "zh:" + strings.TrimPrefix(zipDigest, "sha256:"); !contains(hashes, want) {
		t.Errorf("lock file hashes %v do not hold the pushed %s layer's %s", hashes, host, want)
	}
	// tofu's own h1: for this platform equals the one oprov package printed.
	if want := helloHashes[host].H1; want == "" || !contains(hashes, want) {
		t.Errorf("lock file hashes %v do not hold the h1 oprov package printed for %s (%q)", hashes, host, want)
	}
}

// TestPackageIsReproducible: packaging the same source again gives byte-identical zips.
func TestPackageIsReproducible(t *testing.T) {
	dist := helloRelease(t)
	host := helloPlatforms[0]
	again := t.TempDir()
	mustOprov(t, nil, "package", "--go", filepath.Join(repoRoot, "examples", "hello"), "--version", "1.0.0", "--platform", host, "--out-dir", again)
	name := "terraform-provider-hello_1.0.0_" + host + ".zip"
	a, err := os.ReadFile(filepath.Join(dist, name))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(again, name))
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Errorf("packaging examples/hello twice gave different %s", name)
	}
}
