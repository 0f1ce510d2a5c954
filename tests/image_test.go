package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// The release's base image (.goreleaser.yaml, kos), and the user it runs oprov as.
const (
	imageBase = "gcr.io/distroless/static-debian12:nonroot"
	nonroot   = 65532
)

// TestReleaseImage runs the release's image step as a tag push in CI runs it, with no Docker
// daemon: 'goreleaser release' with OPROV_RELEASE_IMAGE_ONLY (no archives, no GitHub release)
// builds the serve image with ko from a clone of HEAD, pushes it to the TLS test registry
// (KO_DOCKER_REPO) and signs it with a test cosign key (COSIGN_KEY, as docker_signs reads it).
// The distroless base cannot be pulled offline: a stand-in with distroless's users and
// directories is pushed to the registry, and the configuration's base_image, which goreleaser
// does not template, is pointed at it in a copy given with --config. Then the image is checked
// as a container runtime would run it: its index has linux/amd64 and linux/arm64, each config
// runs /ko-app/oprov as 65532:65532, and the linux/amd64 layers, unpacked, run 'oprov serve'
// chrooted in them as that user against a signed provider in the registry. cosign verify
// accepts the image's signature, and refuses it under another key.
func TestReleaseImage(t *testing.T) {
	goreleaser, cosign := peers.Require(t, "goreleaser"), peers.Require(t, "cosign")
	reg := testreg.Start(t, testreg.Options{})
	keys := t.TempDir()
	for _, dir := range []string{keys, filepath.Join(keys, "other")} {
		os.MkdirAll(dir, 0o700)
		gen := exec.Command(cosign, "generate-key-pair")
		gen.Dir, gen.Env = dir, append(os.Environ(), "COSIGN_PASSWORD=test-password")
		if out, err := gen.CombinedOutput(); err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
	}
	ctx := context.Background()
	base := reg.Host + "/distroless/static-debian12:nonroot"
	pushStandInBase(t, ctx, reg, "distroless/static-debian12", "nonroot")

	// A clone of HEAD, tagged as a release, and the configuration with the base swapped.
	clone := filepath.Join(t.TempDir(), "oprov")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = clone
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := exec.Command("git", "clone", "--quiet", "--no-hardlinks", repoRoot, clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	git("-c", "user.name=test", "-c", "user.email=test@example.com", "tag", "-a", "-m", "image test", "v0.0.0-imagetest")
	cfg, err := os.ReadFile(filepath.Join(clone, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(cfg, []byte("base_image: "+imageBase+"\n")); n != 1 {
		t.Fatalf(".goreleaser.yaml names base_image %s %d times, want once", imageBase, n)
	}
	cfgCopy := filepath.Join(t.TempDir(), "goreleaser.yaml")
	os.WriteFile(cfgCopy, bytes.Replace(cfg, []byte(imageBase), []byte(base), 1), 0o644)

	start := time.Now()
	rel := exec.Command(goreleaser, "release", "--clean", "--config", cfgCopy, "--skip=archive,nfpm,sbom,announce")
	rel.Dir = clone
	rel.Env = append(os.Environ(), "PATH="+peers.Dir()+string(os.PathListSeparator)+os.Getenv("PATH"), "GOFLAGS=",
		"OPROV_RELEASE_IMAGE_ONLY=1", "KO_DOCKER_REPO="+reg.Host+"/oprov", "SSL_CERT_FILE="+reg.CAFile,
		"COSIGN_KEY="+filepath.Join(keys, "cosign.key"), "COSIGN_PASSWORD=test-password", "HOME="+t.TempDir())
	if out, err := rel.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release: %v\n%s", err, out)
	}
	t.Logf("goreleaser release (image only) took %s", time.Since(start).Round(time.Second))

	repo := imageRepo(t, reg, "oprov")
	var index ocispec.Index
	indexDesc := fetchJSON(t, ctx, repo, "0.0.0-imagetest", &index)
	platforms := map[string]ocispec.Descriptor{}
	for _, m := range index.Manifests {
		if m.Platform != nil {
			platforms[m.Platform.OS+"/"+m.Platform.Architecture] = m
		}
	}
	if len(platforms) != 2 || platforms["linux/amd64"].Digest == "" || platforms["linux/arm64"].Digest == "" {
		t.Fatalf("the image's index lists %v, want linux/amd64 and linux/arm64", index.Manifests)
	}
	rootfs := map[string]string{}
	var amd64Config ocispec.Image
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		var man ocispec.Manifest
		fetchJSON(t, ctx, repo, platforms[p].Digest.String(), &man)
		var img ocispec.Image
		fetchJSON(t, ctx, repo.Blobs(), man.Config.Digest.String(), &img)
		if img.OS+"/"+img.Architecture != p || img.Config.User != "65532:65532" ||
			strings.Join(img.Config.Entrypoint, " ") != "/ko-app/oprov" || len(img.Config.Cmd) != 0 {
			t.Errorf("%s: config says %s/%s, user %q, entrypoint %q, cmd %q; want %s, 65532:65532, /ko-app/oprov and no cmd",
				p, img.OS, img.Architecture, img.Config.User, img.Config.Entrypoint, img.Config.Cmd, p)
		}
		rootfs[p] = t.TempDir()
		for _, l := range man.Layers {
			unpackLayer(t, ctx, repo, l, rootfs[p])
		}
		if p == "linux/amd64" {
			amd64Config = img
		}
	}
	for p, machine := range map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64} {
		f, err := elf.Open(filepath.Join(rootfs[p], "ko-app", "oprov"))
		if err != nil {
			t.Fatalf("%s: the entrypoint: %v", p, err)
		}
		if f.Machine != machine {
			t.Errorf("%s: the entrypoint is built for %s", p, f.Machine)
		}
		f.Close()
	}

	t.Run("serve runs from the image as 65532 against a signed provider", func(t *testing.T) {
		if runtime.GOOS+"/"+runtime.GOARCH != "linux/amd64" {
			t.Skip("runs the linux/amd64 image's binary")
		}
		pass := []string{"COSIGN_PASSWORD=test-password"}
		mustOprov(t, pass, "push", helloRelease(t), reg.Host+"/providers/acme/hello", "--ca-file", reg.CAFile,
			"--address", "example.com/acme/hello", "--sign", "--key", filepath.Join(keys, "cosign.key"))
		root := rootfs["linux/amd64"]
		// What an operator mounts: the registry's CA and the trusted key (read-only files).
		os.MkdirAll(filepath.Join(root, "etc", "oprov"), 0o755)
		for from, to := range map[string]string{reg.CAFile: "registry-ca.pem", filepath.Join(keys, "cosign.pub"): "cosign.pub"} {
			data, _ := os.ReadFile(from)
			os.WriteFile(filepath.Join(root, "etc", "oprov", to), data, 0o644)
		}
		os.Chmod(root, 0o755) // the container's / (t.TempDir makes it 0700)
		s := startImageServe(t, root, amd64Config, "serve", reg.Host+"/providers/${namespace}/${type}",
			"--listen", "127.0.0.1:0", "--ca-file", "/etc/oprov/registry-ca.pem", "--key", "/etc/oprov/cosign.pub", "-o", "json")
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
		if err != nil || !strings.Contains(string(status), "\nUid:\t65532\t65532\t65532\t65532\n") ||
			!strings.Contains(string(status), "\nGid:\t65532\t65532\t65532\t65532\n") {
			t.Errorf("serve does not run as 65532:65532: %v\n%s", err, status)
		}
		code, _, body := s.get(t, helloPath+"index.json")
		if code != 200 || !strings.Contains(string(body), `"1.0.0"`) {
			t.Errorf("GET %sindex.json: %d %s\n%s", helloPath, code, body, s.logText())
		}
		// Its state (the local CA) and cache went to the non-root user's home in the image.
		for _, dir := range []string{".local/state/oprov/serve", ".cache/oprov"} {
			st, err := os.Stat(filepath.Join(root, "home", "nonroot", dir))
			if err != nil || st.Sys().(*syscall.Stat_t).Uid != nonroot {
				t.Errorf("/home/nonroot/%s: %v", dir, err)
			}
		}
	})

	t.Run("cosign verify accepts the image under the release's key only", func(t *testing.T) {
		verify := func(pub string) error {
			cmd := exec.Command(cosign, "verify", "--key", pub, "--insecure-ignore-tlog=true", reg.Host+"/oprov@"+indexDesc.Digest.String())
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile, "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Logf("cosign verify --key %s: %s", pub, out)
			}
			return err
		}
		if err := verify(filepath.Join(keys, "cosign.pub")); err != nil {
			t.Errorf("the release's key: %v", err)
		}
		if verify(filepath.Join(keys, "other", "cosign.pub")) == nil {
			t.Errorf("another key was accepted")
		}
	})

	t.Run("oprov verify accepts the image under the release's key only", func(t *testing.T) {
		var got struct {
			Verified bool   `json:"verified"`
			Kind     string `json:"kind"`
			Image    struct {
				Digest    string `json:"digest"`
				Manifests []struct{ Platform, Digest string }
			} `json:"image"`
		}
		r := mustOprov(t, nil, "verify", reg.Host+"/oprov:0.0.0-imagetest", "--key", filepath.Join(keys, "cosign.pub"), "--ca-file", reg.CAFile, "-o", "json")
		decodeJSON(t, r.Stdout, &got)
		checked := map[string]string{}
		for _, m := range got.Image.Manifests {
			checked[m.Platform] = m.Digest
		}
		if !got.Verified || got.Kind != "image" || got.Image.Digest != indexDesc.Digest.String() ||
			checked["linux/amd64"] != platforms["linux/amd64"].Digest.String() || checked["linux/arm64"] != platforms["linux/arm64"].Digest.String() {
			t.Errorf("oprov verify: %s", r.Stdout)
		}
		r = oprov(t, nil, "verify", reg.Host+"/oprov:0.0.0-imagetest", "--key", filepath.Join(keys, "other", "cosign.pub"), "--ca-file", reg.CAFile)
		if r.Code != 10 || !strings.Contains(r.Stderr, "none by a trusted key") {
			t.Errorf("another key: exit %d, %s", r.Code, r.Stderr)
		}
	})
}

// imageRepo is an oras-go client of repository name on the test registry.
func imageRepo(t *testing.T, reg *testreg.Registry, name string) *remote.Repository {
	t.Helper()
	repo, err := remote.NewRepository(reg.Host + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	repo.Client = reg.Client(t)
	return repo
}

// fetchJSON fetches a manifest (from repo, by tag or digest) or a blob (from repo.Blobs(), by
// digest) and decodes it into v.
func fetchJSON(t *testing.T, ctx context.Context, from registry.ReferenceFetcher, ref string, v any) ocispec.Descriptor {
	t.Helper()
	desc, rc, err := from.FetchReference(ctx, ref)
	if err != nil {
		t.Fatalf("fetching %s: %v", ref, err)
	}
	defer rc.Close()
	data, err := content.ReadAll(rc, desc)
	if err != nil {
		t.Fatalf("reading %s: %v", ref, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", ref, err)
	}
	return desc
}

// pushStandInBase pushes to repo:tag an index for linux/amd64 and linux/arm64 standing in for the
// distroless static nonroot image: one layer with /etc/passwd and /etc/group naming root and
// nonroot (65532), /home/nonroot owned by it, and /tmp, and a config with its user and PATH.
func pushStandInBase(t *testing.T, ctx context.Context, reg *testreg.Registry, name, tag string) {
	t.Helper()
	repo := imageRepo(t, reg, name)
	var layer bytes.Buffer
	gz := gzip.NewWriter(&layer)
	tw := tar.NewWriter(gz)
	mtime := time.Unix(0, 0)
	for _, e := range []struct {
		name     string
		mode     int64
		uid      int
		contents string
	}{
		{"etc/", 0o755, 0, ""},
		{"etc/passwd", 0o644, 0, "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{"etc/group", 0o644, 0, "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"},
		{"home/", 0o755, 0, ""},
		{"home/nonroot/", 0o700, nonroot, ""},
		{"root/", 0o700, 0, ""},
		{"tmp/", 0o1777, 0, ""},
	} {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(e.contents))}
		if strings.HasSuffix(e.name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.contents)
	}
	tw.Close()
	gz.Close()
	var diff bytes.Buffer
	zr, _ := gzip.NewReader(bytes.NewReader(layer.Bytes()))
	io.Copy(&diff, zr)

	push := func(mediaType string, data []byte) ocispec.Descriptor {
		t.Helper()
		d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(data), Size: int64(len(data))}
		if err := repo.Push(ctx, d, bytes.NewReader(data)); err != nil {
			t.Fatalf("pushing the stand-in base's %s: %v", mediaType, err)
		}
		return d
	}
	mustJSON := func(v any) []byte {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	layerDesc := push(ocispec.MediaTypeImageLayerGzip, layer.Bytes())
	index := ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex}
	for _, arch := range []string{"amd64", "arm64"} {
		cfg := push(ocispec.MediaTypeImageConfig, mustJSON(ocispec.Image{
			Platform: ocispec.Platform{OS: "linux", Architecture: arch},
			Config: ocispec.ImageConfig{User: "65532", WorkingDir: "/home/nonroot",
				Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}},
			RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{digest.FromBytes(diff.Bytes())}},
		}))
		man := push(ocispec.MediaTypeImageManifest, mustJSON(ocispec.Manifest{
			Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			Config: cfg, Layers: []ocispec.Descriptor{layerDesc},
		}))
		man.Platform = &ocispec.Platform{OS: "linux", Architecture: arch}
		index.Manifests = append(index.Manifests, man)
	}
	data := mustJSON(index)
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromBytes(data), Size: int64(len(data))}
	if err := repo.PushReference(ctx, d, bytes.NewReader(data), tag); err != nil {
		t.Fatalf("pushing the stand-in base's index: %v", err)
	}
}

// unpackLayer applies one image layer to dir as a container runtime does: entries in order, with
// their modes and owners, whiteouts (.wh.NAME removes NAME, .wh..wh..opq empties the directory);
// every write goes through os.Root, so a path leaving dir fails the test.
func unpackLayer(t *testing.T, ctx context.Context, repo *remote.Repository, l ocispec.Descriptor, dir string) {
	t.Helper()
	rc, err := repo.Blobs().Fetch(ctx, l)
	if err != nil {
		t.Fatalf("fetching layer %s: %v", l.Digest, err)
	}
	defer rc.Close()
	verified := content.NewVerifyReader(rc, l)
	zr, err := gzip.NewReader(verified)
	if err != nil {
		t.Fatalf("layer %s: %v", l.Digest, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("layer %s: %v", l.Digest, err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." {
			continue
		}
		parent, base := path.Split(name)
		if base == ".wh..wh..opq" {
			entries, _ := fs.ReadDir(root.FS(), path.Clean(parent))
			for _, e := range entries {
				if err := root.RemoveAll(path.Join(parent, e.Name())); err != nil {
					t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
				}
			}
			continue
		}
		if strings.HasPrefix(base, ".wh.") {
			if err := root.RemoveAll(path.Join(parent, strings.TrimPrefix(base, ".wh."))); err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
			continue
		}
		if parent != "" {
			if err := root.MkdirAll(path.Clean(parent), 0o755); err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, mode); err != nil && !errors.Is(err, fs.ErrExist) {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
		case tar.TypeReg:
			root.RemoveAll(name)
			f, err := root.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
			if err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
		case tar.TypeSymlink:
			root.RemoveAll(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
		case tar.TypeLink:
			root.RemoveAll(name)
			if err := root.Link(path.Clean(strings.TrimPrefix(h.Linkname, "/")), name); err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
		default:
			t.Fatalf("layer %s: %s: entry type %q is not unpacked here", l.Digest, h.Name, h.Typeflag)
		}
		if h.Typeflag != tar.TypeSymlink {
			// Mode after owner: chown clears setuid bits; the sticky bit is kept by Chmod.
			if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
			if err := root.Chmod(name, mode|fs.FileMode(h.Mode)&(fs.ModeSticky)); err != nil {
				t.Fatalf("layer %s: %s: %v", l.Digest, h.Name, err)
			}
		}
	}
	if _, err := io.Copy(io.Discard, verified); err != nil {
		t.Fatalf("layer %s: %v", l.Digest, err)
	}
	if err := verified.Verify(); err != nil {
		t.Fatalf("layer %s: %v", l.Digest, err)
	}
}

// startImageServe runs the image's entrypoint with args as a container runtime would: chrooted in
// the unpacked root, as the config's user (uid:gid, no supplementary groups), with the config's
// environment and the user's home as HOME, in the working directory or /.
func startImageServe(t *testing.T, root string, img ocispec.Image, args ...string) *served {
	t.Helper()
	uid, gid, ok := strings.Cut(img.Config.User, ":")
	u, err1 := strconv.ParseUint(uid, 10, 32)
	g, err2 := strconv.ParseUint(gid, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("the image's user %q is not numeric uid:gid", img.Config.User)
	}
	home := "/"
	passwd, _ := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	for _, line := range strings.Split(string(passwd), "\n") {
		if f := strings.Split(line, ":"); len(f) >= 6 && f[2] == uid {
			home = f[5]
		}
	}
	cwd := img.Config.WorkingDir
	if cwd == "" {
		cwd = "/"
	}
	argv := append(append([]string(nil), img.Config.Entrypoint...), append(img.Config.Cmd, args...)...)
	// The path is looked up in the image: exec.Command resolves it on the host, so set it by hand.
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Dir: cwd, Env: append(append([]string(nil), img.Config.Env...), "HOME="+home),
		SysProcAttr: &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}}}
	s := startServeCmd(t, cmd)
	if s.CAFile != "" { // a path in the image
		s.client = caClient(t, filepath.Join(root, s.CAFile))
	}
	return s
}
