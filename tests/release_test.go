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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/peers"
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
			if want := []string{"LICENSE", "README.md", "THIRD_PARTY_NOTICES", "oprov-sandbox" + exe, "oprov" + exe}; !slices.Equal(entries, want) {
				t.Errorf("%s holds %v, want %v in this order", name, entries, want)
			}
			// The license and the notices of the modules built in, as the commit has them.
			for _, doc := range []string{"LICENSE", "THIRD_PARTY_NOTICES"} {
				want, err := os.ReadFile(filepath.Join(repoRoot, doc))
				if err != nil || len(want) == 0 || !bytes.Equal(files[doc].Data, want) {
					t.Errorf("%s: %s is not the repository's (%d bytes, the repository's %d: %v)", name, doc, len(files[doc].Data), len(want), err)
				}
			}
			if !bytes.Contains(files["LICENSE"].Data, []byte("Apache License")) || !bytes.Contains(files["THIRD_PARTY_NOTICES"].Data, []byte("github.com/spf13/cobra")) {
				t.Errorf("%s: LICENSE is not the Apache License, or THIRD_PARTY_NOTICES lists no cobra", name)
			}
			// Reproducible anywhere: the commit's time, not the build's; owner and mode fixed, not
			// the builder's user and umask.
			for _, h := range files {
				mode := int64(0o755)
				if h.Name == "README.md" || h.Name == "LICENSE" || h.Name == "THIRD_PARTY_NOTICES" {
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
		// A deb has no license field: Debian's copyright file says it.
		if data, err := os.ReadFile(filepath.Join(root, "usr/share/doc/oprov/copyright")); err != nil || !bytes.Contains(data, []byte("\nLicense: Apache-2.0\n")) {
			t.Errorf("the deb's /usr/share/doc/oprov/copyright does not say License: Apache-2.0: %v\n%s", err, data)
		}
		out, err = exec.Command(filepath.Join(root, "usr/bin/oprov"), "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "oprov "+version+" (") || !strings.Contains(string(out), commit) {
			t.Errorf("the deb's /usr/bin/oprov --version: %v\n%s", err, out)
		}
	})
	t.Run("each package says its license and installs LICENSE, the notices and the man pages", func(t *testing.T) {
		mans, _ := filepath.Glob(filepath.Join(repoRoot, "docs", "man", "*.1"))
		if len(mans) < 30 {
			t.Fatalf("docs/man holds %d man pages", len(mans))
		}
		want := []string{"usr/bin/oprov", "usr/bin/oprov-sandbox", "usr/share/doc/oprov/LICENSE", "usr/share/doc/oprov/THIRD_PARTY_NOTICES"}
		for _, m := range mans {
			want = append(want, "usr/share/man/man1/"+filepath.Base(m))
		}
		for _, name := range packages {
			license, paths := packageContents(t, filepath.Join(dist, name))
			if license != "Apache-2.0" {
				t.Errorf("%s: license field %q, want Apache-2.0", name, license)
			}
			for _, p := range want {
				if !slices.Contains(paths, p) {
					t.Errorf("%s does not install /%s (it installs %d files)", name, p, len(paths))
				}
			}
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

// packageContents reads a Linux package nfpm wrote: its license (the rpm's LICENSE tag, the apk's
// .PKGINFO license, a deb's copyright file, as a deb has no field) and the paths it installs,
// without a leading slash.
func packageContents(t *testing.T, path string) (license string, paths []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// tarPaths lists a tar stream's files, calling each(name, content) for every one.
	tarPaths := func(r io.Reader, each func(string, []byte)) {
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			body, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/") // ./usr/bin/oprov, .PKGINFO
			paths = append(paths, name)
			each(name, body)
		}
	}
	switch filepath.Ext(path) {
	case ".deb": // an ar archive: debian-binary, control.tar.*, data.tar.gz
		if !bytes.HasPrefix(data, []byte("!<arch>\n")) {
			t.Fatalf("%s is not an ar archive", path)
		}
		for rest := data[8:]; len(rest) >= 60; {
			name := strings.TrimSuffix(strings.TrimSpace(string(rest[:16])), "/")
			size, err := strconv.Atoi(strings.TrimSpace(string(rest[48:58])))
			if err != nil || size > len(rest)-60 {
				t.Fatalf("%s: bad ar member header %q", path, rest[:60])
			}
			body := rest[60 : 60+size]
			rest = rest[60+size+size%2:]
			if !strings.HasPrefix(name, "data.tar") {
				continue
			}
			if name != "data.tar.gz" {
				t.Fatalf("%s: %s, this test reads data.tar.gz only", path, name)
			}
			gz, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			tarPaths(gz, func(name string, body []byte) {
				if name == "usr/share/doc/oprov/copyright" && bytes.Contains(body, []byte("\nLicense: Apache-2.0\n")) {
					license = "Apache-2.0"
				}
			})
		}
	case ".apk": // gzip streams of tar segments: the signature, the control (.PKGINFO), the data
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		all, err := io.ReadAll(gz) // multistream: every segment
		if err != nil {
			t.Fatal(err)
		}
		tarPaths(bytes.NewReader(all), func(name string, body []byte) {
			if name == ".PKGINFO" {
				for _, line := range strings.Split(string(body), "\n") {
					if v, ok := strings.CutPrefix(line, "license = "); ok {
						license = v
					}
				}
			}
		})
	case ".rpm":
		return rpmLicenseAndPaths(t, path, data)
	default:
		t.Fatalf("%s: not a deb, rpm or apk", path)
	}
	return license, paths
}

// rpmLicenseAndPaths reads an rpm's header (after the 96-byte lead and the signature header):
// the LICENSE tag and the file paths (DIRNAMES[DIRINDEXES[i]] + BASENAMES[i]).
func rpmLicenseAndPaths(t *testing.T, path string, data []byte) (string, []string) {
	t.Helper()
	const (
		tagLicense    = 1014
		tagDirIndexes = 1116
		tagBasenames  = 1117
		tagDirnames   = 1118
	)
	be := func(b []byte) int { return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3]) }
	// header reads the header structure at off: its entries by tag, and where it ends.
	header := func(off int) (map[int][]string, map[int][]int, int) {
		if len(data) < off+16 || !bytes.Equal(data[off:off+4], []byte{0x8e, 0xad, 0xe8, 0x01}) {
			t.Fatalf("%s: no rpm header at %d", path, off)
		}
		n, size := be(data[off+8:]), be(data[off+12:])
		index, store := off+16, off+16+16*n
		if store+size > len(data) {
			t.Fatalf("%s: rpm header overruns the file", path)
		}
		strs, ints := map[int][]string{}, map[int][]int{}
		for i := 0; i < n; i++ {
			e := data[index+16*i:]
			tag, typ, at, count := be(e), be(e[4:]), be(e[8:]), be(e[12:])
			p := store + at
			switch typ {
			case 6, 8, 9: // string, string array, i18n string
				for j := 0; j < count && p < store+size; j++ {
					end := bytes.IndexByte(data[p:store+size], 0)
					if end < 0 {
						t.Fatalf("%s: unterminated string in the rpm header", path)
					}
					strs[tag] = append(strs[tag], string(data[p:p+end]))
					p += end + 1
				}
			case 4: // int32
				for j := 0; j < count; j++ {
					ints[tag] = append(ints[tag], be(data[p+4*j:]))
				}
			}
		}
		return strs, ints, store + size
	}
	_, _, end := header(96)
	end = (end + 7) &^ 7 // the signature header is padded to 8 bytes
	strs, ints, _ := header(end)
	var paths []string
	for i, base := range strs[tagBasenames] {
		if i >= len(ints[tagDirIndexes]) || ints[tagDirIndexes][i] >= len(strs[tagDirnames]) {
			t.Fatalf("%s: rpm file lists disagree", path)
		}
		paths = append(paths, strings.TrimPrefix(strs[tagDirnames][ints[tagDirIndexes][i]]+base, "/"))
	}
	license := ""
	if l := strs[tagLicense]; len(l) > 0 {
		license = l[0]
	}
	return license, paths
}
