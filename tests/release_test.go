package tests

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/internal/peers"
)

// releasePlatforms are the six targets a release builds.
var releasePlatforms = []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64", "windows_amd64", "windows_arm64"}

// snapshotRelease runs the repository's GoReleaser configuration as 'goreleaser release
// --snapshot' in a fresh clone of commit at dir, signing SHA256SUMS with the cosign key key, and
// returns the dist directory. skip adds to --skip=publish (a comma-separated list).
func snapshotRelease(t *testing.T, dir, commit, key, skip string) string {
	t.Helper()
	goreleaser := peers.Require(t, "goreleaser")
	peers.Require(t, "syft")   // goreleaser's SBOMs
	peers.Require(t, "cosign") // goreleaser's signature
	// The commit, not HEAD: both runs build the same one even if HEAD moves meanwhile.
	for _, args := range [][]string{{"clone", "--quiet", "--no-hardlinks", "--no-checkout", repoRoot, dir}, {"-C", dir, "checkout", "--quiet", "--detach", commit}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if skip != "" {
		skip = "," + skip
	}
	cmd := exec.Command(goreleaser, "release", "--snapshot", "--clean", "--skip=publish"+skip)
	cmd.Dir = dir
	// cosign, syft and go from the tools directory and PATH; GOFLAGS as CI has it (unset). The
	// build cache is the one the other tests share (TestMain), so a second run only links.
	cmd.Env = append(os.Environ(), "PATH="+peers.Dir()+string(os.PathListSeparator)+os.Getenv("PATH"),
		"COSIGN_KEY="+key, "COSIGN_PASSWORD=test-password", "GOFLAGS=")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, out)
	}
	t.Logf("goreleaser release --snapshot --skip=publish%s took %s", skip, time.Since(start).Round(time.Second))
	return filepath.Join(dir, "dist")
}

// TestReleaseSnapshot is the release run in CI, without publishing: six archives whose
// executables report the version and commit, SHA256SUMS over them, an SBOM for each, a cosign
// bundle over SHA256SUMS that 'cosign verify-blob' and 'oprov verify-blob' accept, and the same
// bytes when built again from the same commit (in another directory).
func TestReleaseSnapshot(t *testing.T) {
	keys := t.TempDir()
	gen := exec.Command(peers.Require(t, "cosign"), "generate-key-pair")
	gen.Dir, gen.Env = keys, append(os.Environ(), "COSIGN_PASSWORD=test-password")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	head, err := exec.Command("git", "-C", repoRoot, "log", "-1", "--format=%H %cI").Output()
	if err != nil {
		t.Fatal(err)
	}
	commit, date, _ := strings.Cut(strings.TrimSpace(string(head)), " ")
	commitTime, err := time.Parse(time.RFC3339, date)
	if err != nil {
		t.Fatal(err)
	}

	dist := snapshotRelease(t, filepath.Join(t.TempDir(), "a"), commit, filepath.Join(keys, "cosign.key"), "")
	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	archives := map[string]string{} // platform: archive name
	for name := range sums {
		for _, p := range releasePlatforms {
			if strings.HasPrefix(name, "oprov_") && (strings.HasSuffix(name, "_"+p+".tar.gz") || strings.HasSuffix(name, "_"+p+".zip")) {
				archives[p] = name
			}
		}
	}
	if len(archives) != len(releasePlatforms) {
		t.Fatalf("SHA256SUMS lists %d archives of the six platforms: %v", len(archives), sums)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(archives["linux_amd64"], "oprov_"), "_linux_amd64.tar.gz")
	// Linux packages: deb, rpm and apk for amd64 and arm64.
	var packages []string
	for _, arch := range []string{"amd64", "arm64"} {
		for _, format := range []string{"deb", "rpm", "apk"} {
			name := "oprov_" + version + "_linux_" + arch + "." + format
			if _, ok := sums[name]; !ok {
				t.Errorf("SHA256SUMS does not list the package %s", name)
			}
			packages = append(packages, name)
		}
	}

	t.Run("SHA256SUMS is right", func(t *testing.T) {
		if len(sums) != 2*len(releasePlatforms)+len(packages) {
			t.Errorf("SHA256SUMS lists %d files, want the %d archives, their SBOMs and %d packages: %v", len(sums), len(releasePlatforms), len(packages), sums)
		}
		for name, want := range sums {
			data, err := os.ReadFile(filepath.Join(dist, name))
			if err != nil {
				t.Fatal(err)
			}
			if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != want {
				t.Errorf("%s: SHA256SUMS says %s", name, want)
			}
		}
	})
	t.Run("each archive holds oprov and oprov-sandbox, which report the version and commit", func(t *testing.T) {
		for p, name := range archives {
			goos, goarch, _ := strings.Cut(p, "_")
			exe := ""
			if goos == "windows" {
				exe = ".exe"
			}
			files, entries := unpackArchive(t, filepath.Join(dist, name))
			// The files (sorted by name), then the build: the same order every run.
			if want := []string{"README.md", "oprov-sandbox" + exe, "oprov" + exe}; !slices.Equal(entries, want) {
				t.Errorf("%s holds %v, want %v in this order", name, entries, want)
			}
			// Reproducible anywhere: the commit's time, not the build's; owner and mode fixed, not
			// the builder's user and umask.
			for _, h := range files {
				mode := int64(0o755)
				if h.Name == "README.md" {
					mode = 0o644
				}
				if !h.ModTime.Equal(commitTime) || h.Mode&0o777 != mode || (!strings.HasSuffix(name, ".zip") && (h.Uname != "root" || h.Gname != "root")) {
					t.Errorf("%s: %s has time %s, mode %o, owner %s:%s; want %s, %o, root:root", name, h.Name, h.ModTime, h.Mode&0o777, h.Uname, h.Gname, commitTime, mode)
				}
			}
			// go version -m says how each was built. With -trimpath it does not record -ldflags:
			// the version and commit set with -X are looked for in the executable itself, and the
			// host's oprov is run.
			for _, bin := range []string{"oprov" + exe, "oprov-sandbox" + exe} {
				path := filepath.Join(t.TempDir(), bin)
				if err := os.WriteFile(path, files[bin].Data, 0o755); err != nil {
					t.Fatal(err)
				}
				out, err := exec.Command("go", "version", "-m", path).CombinedOutput()
				for _, want := range []string{"GOOS=" + goos, "GOARCH=" + goarch, "CGO_ENABLED=0", "-trimpath=true"} {
					if err != nil || !strings.Contains(string(out), "\t"+want+"\n") {
						t.Errorf("%s: %s was not built with %s: go version -m: %v\n%s", name, bin, want, err, out)
					}
				}
				if bin != "oprov"+exe {
					continue
				}
				if !bytes.Contains(files[bin].Data, []byte(version)) || !bytes.Contains(files[bin].Data, []byte(commit)) {
					t.Errorf("%s: %s holds neither version %s nor commit %s (-X main.version, main.commit)", name, bin, version, commit)
				}
				if p == runtime.GOOS+"_"+runtime.GOARCH {
					out, err := exec.Command(path, "--version").CombinedOutput()
					if err != nil || !strings.HasPrefix(string(out), "oprov "+version+" (") || !strings.Contains(string(out), commit) {
						t.Errorf("%s: oprov --version: %v\n%s", name, err, out)
					}
				}
			}
		}
	})
	t.Run("the deb installs both commands in /usr/bin", func(t *testing.T) {
		dpkg := peers.Require(t, "dpkg-deb") // Debian's; the rpm and apk are nfpm's work as the deb is
		deb := filepath.Join(dist, "oprov_"+version+"_linux_"+runtime.GOARCH+".deb")
		out, err := exec.Command(dpkg, "--field", deb, "Package", "Architecture").CombinedOutput()
		if err != nil || string(out) != "Package: oprov\nArchitecture: "+runtime.GOARCH+"\n" {
			t.Errorf("dpkg-deb --field %s: %v\n%s", filepath.Base(deb), err, out)
		}
		root := t.TempDir()
		if out, err := exec.Command(dpkg, "--extract", deb, root).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
		}
		if _, err := os.Stat(filepath.Join(root, "usr/bin/oprov-sandbox")); err != nil {
			t.Errorf("the deb has no /usr/bin/oprov-sandbox: %v", err)
		}
		out, err = exec.Command(filepath.Join(root, "usr/bin/oprov"), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "oprov "+version+" (") || !strings.Contains(string(out), commit) {
			t.Errorf("the deb's /usr/bin/oprov --version: %v\n%s", err, out)
		}
	})
	t.Run("an SBOM for each archive", func(t *testing.T) {
		for _, name := range archives {
			data, err := os.ReadFile(filepath.Join(dist, name+".sbom.json"))
			if err != nil || !bytes.Contains(data, []byte("spdxVersion")) || !bytes.Contains(data, []byte("github.com/spf13/cobra")) {
				t.Errorf("%s's SBOM: %v", name, err)
			}
		}
	})
	t.Run("cosign verify-blob accepts the signature over SHA256SUMS", func(t *testing.T) {
		// A changed SHA256SUMS is refused, so the acceptance means something.
		data, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		data[0] ^= 1
		changed := filepath.Join(t.TempDir(), "SHA256SUMS")
		if err := os.WriteFile(changed, data, 0o644); err != nil {
			t.Fatal(err)
		}
		// The command docs/installing.md shows, with the test key for the release workflow's
		// identity: cosign v2 (2.6) and v3 both read the bundle format without a flag. A key needs
		// no transparency log, and offline cosign needs a trusted root even then: an empty one.
		emptyRoot := filepath.Join(t.TempDir(), "empty-root.json")
		writeFile(t, emptyRoot, `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`)
		for _, cosign := range []string{"cosign", "cosign3"} {
			verify := func(sums string) error {
				out, err := exec.Command(peers.Require(t, cosign), "verify-blob", "--bundle", filepath.Join(dist, "SHA256SUMS.sigstore.json"),
					"--key", filepath.Join(keys, "cosign.pub"), "--insecure-ignore-tlog", "--trusted-root", emptyRoot, sums).CombinedOutput()
				if err != nil {
					t.Logf("%s verify-blob %s: %s", cosign, sums, out)
				}
				return err
			}
			if err := verify(filepath.Join(dist, "SHA256SUMS")); err != nil {
				t.Errorf("%s refused the release's own SHA256SUMS: %v", cosign, err)
			}
			if verify(changed) == nil {
				t.Errorf("%s accepted a changed SHA256SUMS", cosign)
			}
		}
	})
	t.Run("oprov verify-blob accepts the signature over SHA256SUMS", func(t *testing.T) {
		// oprov built from the tree under test, as docs/installing.md uses an installed one to
		// check the next release: with the test key for the release workflow's identity.
		bundle, pub := filepath.Join(dist, "SHA256SUMS.sigstore.json"), filepath.Join(keys, "cosign.pub")
		if r := oprov(t, nil, "verify-blob", filepath.Join(dist, "SHA256SUMS"), "--bundle", bundle, "--key", pub); r.Code != 0 {
			t.Errorf("oprov verify-blob refused the release's own SHA256SUMS: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
		data, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		changed := filepath.Join(t.TempDir(), "SHA256SUMS")
		writeFile(t, changed, strings.Replace(string(data), "linux_amd64", "linux_arm64", 1))
		if r := oprov(t, nil, "verify-blob", changed, "--bundle", bundle, "--key", pub); r.Code != 10 {
			t.Errorf("oprov verify-blob on a changed SHA256SUMS: exit %d, want 10 (refused)\n%s%s", r.Code, r.Stdout, r.Stderr)
		}
	})
	t.Run("the installing page's sha256sum and tar commands work on a download of one archive", func(t *testing.T) {
		dl := t.TempDir()
		for _, name := range []string{"SHA256SUMS", archives["linux_amd64"]} {
			if err := os.Symlink(filepath.Join(dist, name), filepath.Join(dl, name)); err != nil {
				t.Fatal(err)
			}
		}
		check := exec.Command("sha256sum", "--ignore-missing", "-c", "SHA256SUMS")
		check.Dir = dl
		if out, err := check.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != archives["linux_amd64"]+": OK" {
			t.Errorf("sha256sum --ignore-missing -c SHA256SUMS: %v\n%s", err, out)
		}
		untar := exec.Command("tar", "xzf", archives["linux_amd64"], "oprov", "oprov-sandbox")
		untar.Dir = dl
		if out, err := untar.CombinedOutput(); err != nil {
			t.Errorf("tar xzf %s oprov oprov-sandbox: %v\n%s", archives["linux_amd64"], err, out)
		}
	})
	t.Run("the same commit gives the same archives and packages", func(t *testing.T) {
		// Archives only: no SBOMs (syft's carry a random namespace and the time) and no signature.
		again := snapshotRelease(t, filepath.Join(t.TempDir(), "b"), commit, filepath.Join(keys, "cosign.key"), "sbom,sign")
		for _, name := range append(slices.Collect(maps.Values(archives)), packages...) {
			a, _ := os.ReadFile(filepath.Join(dist, name))
			b, err := os.ReadFile(filepath.Join(again, name))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s differs when built again from the same commit (%v)", name, err)
			}
		}
	})
}

// readSums reads a SHA256SUMS file: name to hex digest.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		out[name] = sum
	}
	return out
}

// archiveEntry is one file of a release archive.
type archiveEntry struct {
	Name         string
	ModTime      time.Time
	Mode         int64
	Uname, Gname string // tar only
	Data         []byte
}

// unpackArchive reads a release archive (tar.gz or zip) into memory: its files by name, and their
// names in the archive's order.
func unpackArchive(t *testing.T, path string) (map[string]archiveEntry, []string) {
	t.Helper()
	files := map[string]archiveEntry{}
	var order []string
	add := func(e archiveEntry, r io.Reader) {
		var err error
		if e.Data, err = io.ReadAll(r); err != nil {
			t.Fatalf("%s: %s: %v", path, e.Name, err)
		}
		files[e.Name] = e
		order = append(order, e.Name)
	}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			add(archiveEntry{Name: f.Name, ModTime: f.Modified, Mode: int64(f.Mode().Perm())}, rc)
			rc.Close()
		}
		return files, order
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, order
		}
		if err != nil {
			t.Fatal(err)
		}
		add(archiveEntry{Name: h.Name, ModTime: h.ModTime, Mode: h.Mode, Uname: h.Uname, Gname: h.Gname}, tr)
	}
}
