package tests

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	origin "github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// hostileBundle: a small signed version (cosign's .sig tag form, the form whose tag a load
// wrote before its signature) saved into a bundle, and a registry to load hostile variants of
// it into, which already holds one good load.
type hostileBundle struct {
	env  []string
	reg  *testreg.Registry
	good string // the saved bundle
	pub  string
	dir  string
}

func newHostileBundle(t *testing.T) *hostileBundle {
	t.Helper()
	ca := testreg.NewCA(t, t.TempDir())
	src := testreg.Start(t, testreg.Options{CA: ca})
	h := &hostileBundle{reg: testreg.Start(t, testreg.Options{CA: ca}), dir: t.TempDir()}
	h.env = []string{"SSL_CERT_FILE=" + ca.File, "COSIGN_PASSWORD=test-password", "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE="}
	keys := t.TempDir()
	mustOprov(t, h.env, "keygen", "--output-key-prefix", filepath.Join(keys, "cosign"))
	h.pub = filepath.Join(keys, "cosign.pub")
	dist := origin.FakeRelease(t, "hello", "1.0.0", "linux_amd64")
	pushJSON(t, h.env, dist, src.Host+"/providers/acme/hello", "--sign", "--legacy-tag", "--key", filepath.Join(keys, "cosign.key"))
	h.good = filepath.Join(h.dir, "good.tar")
	mustOprov(t, h.env, "save", src.Host+"/providers/acme/hello:1.0.0", "--to", h.good)
	mustOprov(t, h.env, "load", h.good, "--to", h.reg.Host+"/first", "--key", h.pub)
	return h
}

// refused loads a hostile bundle and checks that it fails naming each of want, and that the
// registry is as it was (every repository, tag and digest).
func (h *hostileBundle) refused(t *testing.T, bundle string, want []string, extra ...string) result {
	t.Helper()
	before := wholeRegistry(t, h.reg)
	r := oprov(t, h.env, append([]string{"load", bundle, "--to", h.reg.Host + "/airgap"}, extra...)...)
	t.Logf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
	if r.Code != 1 {
		t.Errorf("exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r.Stderr)
		}
	}
	if after := wholeRegistry(t, h.reg); !reflect.DeepEqual(before, after) {
		t.Errorf("a refused load changed the registry:\nbefore %v\nafter  %v", before, after)
	}
	return r
}

// wholeRegistry is every repository:tag in a registry, with its digest.
func wholeRegistry(t *testing.T, reg *testreg.Registry) map[string]string {
	t.Helper()
	c := reg.Client(t)
	var cat struct{ Repositories []string }
	getJSON(t, c, reg.URL()+"/v2/_catalog?n=1000", &cat)
	out := map[string]string{}
	for _, repo := range cat.Repositories {
		var tags struct{ Tags []string }
		getJSON(t, c, reg.URL()+"/v2/"+repo+"/tags/list", &tags)
		for _, tag := range tags.Tags {
			req, _ := http.NewRequest(http.MethodHead, reg.URL()+"/v2/"+repo+"/manifests/"+tag, nil)
			req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			out[repo+":"+tag] = resp.Header.Get("Docker-Content-Digest")
		}
	}
	return out
}

// rewriteTar copies a tarball entry by entry through edit (which gives an entry's new bytes),
// then lets raw write blocks of its own before the end.
func rewriteTar(t *testing.T, in, out string, edit func(name string, data []byte) []byte, raw func(w io.Writer)) {
	t.Helper()
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(data)), tar.NewWriter(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			body = edit(h.Name, body)
		}
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	tw.Flush()
	if raw != nil {
		raw(&buf)
	}
	tw.Close()
	writeFile(t, out, buf.String())
}

// renameTags rewrites the ref.name annotations of a bundle's index.json.
func renameTags(from, to string) func(string, []byte) []byte {
	return func(name string, data []byte) []byte {
		if name != "index.json" {
			return data
		}
		q, _ := json.Marshal(to) // a backslash in a name is JSON-escaped there
		return bytes.ReplaceAll(data, []byte(`"`+from), q[:len(q)-1])
	}
}

// TestLoadRefusesNamesLeavingTo: tags whose repository part would leave --to ("..", an
// absolute path, an empty part, a backslash) are refused before anything is written, into a
// layout and into a registry.
func TestLoadRefusesNamesLeavingTo(t *testing.T) {
	h := newHostileBundle(t)
	outside := t.TempDir()
	for _, name := range []string{"../../../../" + strings.TrimPrefix(outside, "/") + "/x/y", "/" + strings.TrimPrefix(outside, "/") + "/x", "providers//hello", `providers\..\..\hello`, "providers/acme/.."} {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.tar")
			rewriteTar(t, h.good, bad, renameTags("providers/acme/hello:", name+":"), nil)
			h.refused(t, bad, []string{"not a valid OCI name", "nothing was pushed"})
			layout := filepath.Join(t.TempDir(), "layout")
			r := oprov(t, h.env, "load", bad, "--to", "oci-layout:"+layout, "--key", h.pub)
			if r.Code != 1 || !strings.Contains(r.Stderr, "would be written outside --to") {
				t.Errorf("into a layout: exit %d\n%s", r.Code, r.Stderr)
			}
			for _, p := range []string{layout, filepath.Join(outside, "x")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("a refused load wrote %s", p)
				}
			}
		})
	}
}

// gnuSparseHeader is one old-GNU sparse entry ('S') whose file is size bytes once expanded, of
// which only the last 512 are stored: 512 bytes in the tarball, 64 GiB to whoever expands it.
func gnuSparseHeader(name string, size int64) []byte {
	blk := make([]byte, 512)
	copy(blk[0:], name)
	copy(blk[100:], "0000644\x00")
	copy(blk[108:], "0000000\x00")
	copy(blk[116:], "0000000\x00")
	copy(blk[124:], "00000001000\x00") // 512 bytes stored
	copy(blk[136:], "00000000000\x00")
	blk[156] = 'S'
	copy(blk[257:], "ustar  \x00")
	base256 := func(field []byte, v int64) {
		field[0] = 0x80
		binary.BigEndian.PutUint64(field[len(field)-8:], uint64(v))
	}
	base256(blk[386:398], size-512) // the one stored chunk: its offset
	base256(blk[398:410], 512)      // and length
	base256(blk[483:495], size)     // the real size
	copy(blk[148:156], "        ")
	sum := 0
	for _, b := range blk {
		sum += int(b)
	}
	copy(blk[148:], fmt.Sprintf("%06o\x00 ", sum))
	data := bytes.Repeat([]byte(" "), 512)
	data[0] = '{'
	return append(blk, data...)
}

// TestBundleSparseListingRefused: a small bundle whose listing is a 64 GiB GNU sparse file is
// refused at once, in bounded memory, by load and by save --since, and nothing is written.
func TestBundleSparseListingRefused(t *testing.T) {
	h := newHostileBundle(t)
	bad := filepath.Join(h.dir, "sparse.tar")
	rewriteTar(t, h.good, bad, nil, func(w io.Writer) { w.Write(gnuSparseHeader("oprov-bundle.json", 64<<30)) })
	st, _ := os.Stat(bad)
	t.Logf("the bundle is %d bytes", st.Size())
	want := []string{`entry "oprov-bundle.json"`, "a sparse file (GNU sparse, 68719476736 bytes once expanded)", "nothing was written"}
	before := wholeRegistry(t, h.reg)
	r, rss, took := bounded(t, h.env, "load", bad, "--to", h.reg.Host+"/airgap")
	t.Logf("load: exit %d after %s, peak RSS %.1f MiB: %s", r.Code, took.Round(time.Millisecond), rss, strings.TrimSpace(r.Stderr))
	checkRefusal(t, r, rss, want)
	if after := wholeRegistry(t, h.reg); !reflect.DeepEqual(before, after) {
		t.Errorf("a refused load changed the registry:\nbefore %v\nafter  %v", before, after)
	}

	cfg := t.TempDir()
	writeFile(t, filepath.Join(cfg, "main.tf"), helloConfig)
	out := filepath.Join(t.TempDir(), "next.tar")
	r, rss, took = bounded(t, h.env, "save", "--config", cfg, "--since", bad, "--to", out)
	t.Logf("save --since: exit %d after %s, peak RSS %.1f MiB: %s", r.Code, took.Round(time.Millisecond), rss, strings.TrimSpace(r.Stderr))
	checkRefusal(t, r, rss, want)
	assertNothingBeside(t, filepath.Dir(out), "next")
}

func checkRefusal(t *testing.T, r result, rss float64, want []string) {
	t.Helper()
	if r.Code != 1 {
		t.Errorf("exit %d, want 1\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, r.Stderr)
		}
	}
	if rss > maxHostileRSS {
		t.Errorf("peak RSS %.1f MiB, over %d MiB", rss, maxHostileRSS)
	}
}

// TestLoadCorruptSigTagsNothing: a bundle whose cosign .sig manifest has a corrupt config blob
// is refused before anything is pushed: no version tag, no .sig tag.
func TestLoadCorruptSigTagsNothing(t *testing.T) {
	h := newHostileBundle(t)
	sigConfig := sigConfigDigest(t, h.good)
	bad := filepath.Join(h.dir, "badsig.tar")
	rewriteTar(t, h.good, bad, func(name string, data []byte) []byte {
		if name == "blobs/sha256/"+strings.TrimPrefix(sigConfig, "sha256:") {
			data = append([]byte(nil), data...)
			data[len(data)/2] ^= 0x01
		}
		return data
	}, nil)
	h.refused(t, bad, []string{"the bundle is damaged, so nothing was pushed", sigConfig, "the bundle sent hash to"})
	h.refused(t, bad, []string{"the bundle is damaged"}, "--key", h.pub)
}

// sigConfigDigest finds, in a bundle, the config blob of the manifest a .sig tag names.
func sigConfigDigest(t *testing.T, bundle string) string {
	t.Helper()
	files := tarFiles(t, bundle)
	var idx struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	for _, m := range idx.Manifests {
		if strings.HasSuffix(m.Annotations["org.opencontainers.image.ref.name"], ".sig") {
			var man struct{ Config struct{ Digest string } }
			if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")], &man); err != nil {
				t.Fatal(err)
			}
			uses := 0
			for name, data := range files {
				if strings.HasPrefix(name, "blobs/") && bytes.Contains(data, []byte(man.Config.Digest)) {
					uses++
				}
			}
			if uses != 1 {
				t.Fatalf("the .sig config %s is named by %d manifests: corrupting it would not test the .sig alone", man.Config.Digest, uses)
			}
			return man.Config.Digest
		}
	}
	t.Fatalf("no .sig tag in %s", bundle)
	return ""
}

func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name], _ = io.ReadAll(tr)
	}
}

// TestLoadRefusesLyingListing: a listing that names a pattern, a provider the bundle does not
// hold, or another index than the bundle's is refused before anything is written; an honest one
// prints only what it holds, with the --key load verified with.
func TestLoadRefusesLyingListing(t *testing.T) {
	h := newHostileBundle(t)
	files := tarFiles(t, h.good)
	var idx struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	json.Unmarshal(files["index.json"], &idx)
	index := ""
	for _, m := range idx.Manifests {
		if m.Annotations["org.opencontainers.image.ref.name"] == "providers/acme/hello:1.0.0" {
			index = m.Digest
		}
	}
	listing := func(addr, repo, digest string) func(w io.Writer) {
		return func(w io.Writer) {
			l := fmt.Sprintf(`{"format":"oprov-bundle/v1","providers":[{"address":%q,"version":"1.0.0","from":"oci","repository":%q,"tag":"1.0.0","index_digest":%q,"platforms":["linux_amd64"],"in_bundle":true}],"blobs":[]}`, addr, repo, digest)
			tw := tar.NewWriter(w)
			tw.WriteHeader(&tar.Header{Name: "oprov-bundle.json", Mode: 0o644, Size: int64(len(l)), Typeflag: tar.TypeReg})
			tw.Write([]byte(l))
			tw.Flush()
		}
	}
	rename := renameTags("providers/acme/hello:", "example.com/acme/hello:")
	cases := []struct {
		name, addr, repo, digest string
		want                     string
	}{
		{"every public provider", "registry.opentofu.org/*/*", "example.com/acme/hello", index, `names "registry.opentofu.org/*/*", a pattern`},
		{"a provider it does not hold", "registry.opentofu.org/hashicorp/aws", "registry.opentofu.org/hashicorp/aws", index, "which the bundle does not hold"},
		{"another repository", "registry.opentofu.org/hashicorp/aws", "example.com/acme/hello", index, `not "registry.opentofu.org/hashicorp/aws"`},
		{"another index", "example.com/acme/hello", "example.com/acme/hello", "sha256:" + strings.Repeat("ab", 32), "but the bundle's example.com/acme/hello:1.0.0 is " + index},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "lying.tar")
			rewriteTar(t, h.good, bad, rename, listing(c.addr, c.repo, c.digest))
			h.refused(t, bad, []string{"the bundle's listing (oprov-bundle.json) does not match what the bundle holds", c.want, "nothing was pushed"}, "--key", h.pub)
		})
	}
	t.Run("honest", func(t *testing.T) {
		good := filepath.Join(t.TempDir(), "honest.tar")
		rewriteTar(t, h.good, good, rename, listing("example.com/acme/hello", "example.com/acme/hello", index))
		r := mustOprov(t, h.env, "load", good, "--to", h.reg.Host+"/honest", "--key", h.pub, "-o", "json")
		var out struct {
			TofuRC string `json:"tofurc"`
			Oprov  string `json:"oprov_hcl"`
		}
		decodeJSON(t, r.Stdout, &out)
		if !strings.Contains(out.TofuRC, `"example.com/acme/hello"`) || strings.Contains(out.TofuRC, "*") {
			t.Errorf("printed CLI configuration:\n%s", out.TofuRC)
		}
		if !strings.Contains(out.Oprov, "public_keys") || !strings.Contains(out.Oprov, fmt.Sprintf("%q", h.pub)) {
			t.Errorf("the printed oprov.hcl does not carry --key %s:\n%s", h.pub, out.Oprov)
		}
	})
}

// TestLoadOriginProvidersByPolicy: a configuration bundle's origin provider (its SHA256SUMS
// signed by the origin's OpenPGP key, attached by save --config) loads under --policy by that
// evidence when a trust rule names the key's fingerprint in origin_keys; another fingerprint, or
// a policy that trusts only cosign keys, refuses the load naming the key the evidence carries,
// and nothing is written. The printed oprov.hcl carries the policy.
func TestLoadOriginProvidersByPolicy(t *testing.T) {
	f := newAirGapFixture(t)
	tarball := filepath.Join(t.TempDir(), "deps.tar")
	f.save(t, tarball)
	fpr := fmt.Sprintf("%X", f.org.Key.PrimaryKey.Fingerprint)
	other := fmt.Sprintf("%X", origin.NewKey(t, "not the origin").PrimaryKey.Fingerprint)
	dir := t.TempDir()
	policy := func(name, originKey string) string {
		p := filepath.Join(dir, name)
		writeFile(t, p, fmt.Sprintf(`trust "acme" {
  providers = ["example.com/acme/*"]
  keys      = [%q]
}
trust "origin" {
  providers   = [%q]
  origin_keys = [%q]
}
`, f.pub, f.org.Address(), originKey))
		return p
	}
	reg := testreg.Start(t, testreg.Options{CA: f.ca})
	to := reg.Host + "/airgap"
	refused := func(t *testing.T, code int, want []string, args ...string) {
		t.Helper()
		before := wholeRegistry(t, reg)
		r := oprov(t, f.env, append([]string{"load", tarball, "--to", to}, args...)...)
		t.Logf("exit %d: %s", r.Code, strings.TrimSpace(r.Stderr))
		if r.Code != code {
			t.Errorf("exit %d, want %d", r.Code, code)
		}
		for _, w := range want {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("the refusal does not say %q", w)
			}
		}
		if after := wholeRegistry(t, reg); !reflect.DeepEqual(before, after) {
			t.Errorf("a refused load changed the registry: %v -> %v", before, after)
		}
	}
	t.Run("another origin key", func(t *testing.T) {
		refused(t, 10, []string{"nothing was pushed", f.org.Address(), "carries the key(s) " + fpr, "origin_keys"}, "--policy", policy("other.hcl", other))
	})
	t.Run("cosign keys only", func(t *testing.T) {
		refused(t, 12, []string{"nothing was pushed", "origin_keys = [the signing key's fingerprint]"}, "--key", f.pub)
	})
	t.Run("the origin's key", func(t *testing.T) {
		p := policy("origin.hcl", fpr)
		r := mustOprov(t, f.env, "load", tarball, "--to", to, "--policy", p, "-o", "json")
		var out struct {
			Loaded []struct{ Repository string }
			TofuRC string   `json:"tofurc"`
			Oprov  string   `json:"oprov_hcl"`
			Left   []string `json:"left_out"`
		}
		decodeJSON(t, r.Stdout, &out)
		if len(out.Loaded) != 2 || len(out.Left) != 0 {
			t.Errorf("loaded %v, left out %v", out.Loaded, out.Left)
		}
		for _, a := range []string{"example.com/acme/hello", f.org.Address()} {
			if !strings.Contains(out.TofuRC, fmt.Sprintf("%q", a)) || !strings.Contains(out.Oprov, fmt.Sprintf("%q", a)) {
				t.Errorf("the printed configuration leaves out %s:\n%s\n%s", a, out.TofuRC, out.Oprov)
			}
		}
		if !strings.Contains(out.Oprov, fmt.Sprintf("policy              = %q", p)) {
			t.Errorf("the printed oprov.hcl does not carry --policy %s:\n%s", p, out.Oprov)
		}
		if state := wholeRegistry(t, reg); len(state) == 0 {
			t.Errorf("nothing in the registry after the load")
		}
	})
}
