package bundle

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// TestCheckRepository: names that could leave a load's destination, or that a registry refuses,
// are refused; repository paths oprov writes pass.
func TestCheckRepository(t *testing.T) {
	for _, ok := range []string{"providers/acme/hello", "example.com/acme/hello", "localhost_5000/acme/hello", "a/b-c/d__e", "x"} {
		if err := checkRepository(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", "../x", "a/../b", "/abs/x", "a//b", `a\b`, "a/", "A/b", "a/.b", "a/b.", "a/-b", strings.Repeat("a", 256)} {
		if err := checkRepository(bad); !errors.Is(err, errBadName) {
			t.Errorf("%q accepted (%v)", bad, err)
		}
	}
	for _, bad := range []string{"", ".x", "-x", "a:b", "a/b", strings.Repeat("t", 129)} {
		if err := checkTag("r", bad); !errors.Is(err, errBadName) {
			t.Errorf("tag %q accepted (%v)", bad, err)
		}
	}
}

// writeTar writes a tarball of the given headers, each with Size bytes of data (or none for
// header-only types).
func writeTar(t *testing.T, hdrs ...*tar.Header) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("{"), int(h.Size)))
		}
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "b.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckTarballRefuses: links, devices, FIFOs, a repeated entry and an entry over its bound
// are refused by name before anything reads them, in Open and in ReadListing.
func TestCheckTarballRefuses(t *testing.T) {
	ctx := context.Background()
	reg := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
	}
	cases := []struct {
		name string
		hdrs []*tar.Header
		want string
	}{
		{"symlink", []*tar.Header{{Name: listingName, Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}}, `a link to "/etc/passwd"`},
		{"hard link", []*tar.Header{reg("index.json", 2), {Name: listingName, Typeflag: tar.TypeLink, Linkname: "index.json"}}, "a link to"},
		{"device", []*tar.Header{{Name: "blobs/sha256/x", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}, "a device, FIFO or other special file"},
		{"fifo", []*tar.Header{{Name: "index.json", Typeflag: tar.TypeFifo}}, "a device, FIFO"},
		{"twice", []*tar.Header{reg(listingName, 2), reg("./"+listingName, 2)}, "appears twice"},
		{"large layout marker", []*tar.Header{reg("oci-layout", 5000)}, "over the 4096 bytes the layout marker may hold"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeTar(t, c.hdrs...)
			for what, err := range map[string]error{"Open": open(ctx, p), "ReadListing": readListing(ctx, p)} {
				if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing was written") {
					t.Errorf("%s: %v, want %q", what, err, c.want)
				}
			}
		})
	}
}

func open(ctx context.Context, p string) error { _, err := Open(ctx, p, ociref.Limits{}); return err }
func readListing(ctx context.Context, p string) error {
	_, err := ReadListing(ctx, p, ociref.Limits{})
	return err
}

// TestReadListingBounded: a listing file over its bound is refused without being read whole.
func TestReadListingBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.listing.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(maxListingSize + 1)
	f.Close()
	if _, err := ReadListing(context.Background(), p, ociref.DefaultLimits()); err == nil || !strings.Contains(err.Error(), "is over") {
		t.Errorf("an oversized listing file: %v", err)
	}
}

// FuzzCheckTarball: whatever bytes a bundle holds, checking it and reading its listing ends with
// a listing or an error, never a panic, and no entry over its bound passes.
func FuzzCheckTarball(f *testing.F) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	l := []byte(`{"format":"oprov-bundle/v1","providers":[]}`)
	tw.WriteHeader(&tar.Header{Name: listingName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(l))})
	tw.Write(l)
	tw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		if checkTarStream(context.Background(), bytes.NewReader(data), "f.tar", 0) != nil {
			return
		}
		tr := tar.NewReader(bytes.NewReader(data))
		for {
			h, err := tr.Next()
			if err != nil {
				return
			}
			if limit, _ := entryLimits(h.Name, 0); h.Size > limit {
				t.Fatalf("entry %q of %d bytes passed, over its bound %d", h.Name, h.Size, limit)
			}
			if h.Name == listingName {
				if data, err := readBounded(tr, maxListingSize, h.Name); err == nil {
					parseListing(h.Name, data)
				}
			}
		}
	})
}

// TestPrintedTrust: the printed oprov.hcl carries what load verified with.
func TestPrintedTrust(t *testing.T) {
	l := &Listing{Providers: []ListedProvider{{Address: "example.com/acme/hello"}}}
	got := l.OprovHCL("reg.example/airgap", PrintedTrust{PublicKeys: []string{"/k/cosign.pub"},
		Identities: []sign.IdentityBlock{{Issuer: "https://issuer", SubjectRegexp: "^x$"}}, TrustedRoot: "/k/root.json"})
	for _, w := range []string{`public_keys         = ["/k/cosign.pub"]`, `trusted_root        = "/k/root.json"`, `issuer         = "https://issuer"`, `subject_regexp = "^x$"`, `include             = ["example.com/acme/hello"]`} {
		if !strings.Contains(got, w) {
			t.Errorf("printed oprov.hcl lacks %s:\n%s", w, got)
		}
	}
	if got := l.OprovHCL("reg.example/airgap", PrintedTrust{Policy: "/p/policy.hcl"}); !strings.Contains(got, `policy              = "/p/policy.hcl"`) {
		t.Errorf("printed oprov.hcl lacks the policy:\n%s", got)
	}
}

// ustarBlock is one raw ustar header block (archive/tar will not write GNU sparse records).
func ustarBlock(name string, typeflag byte, size int) []byte {
	blk := make([]byte, 512)
	copy(blk, name)
	copy(blk[100:], "0000644\x00")
	copy(blk[108:], "0000000\x00")
	copy(blk[116:], "0000000\x00")
	copy(blk[124:], fmt.Sprintf("%011o\x00", size))
	copy(blk[136:], "00000000000\x00")
	blk[156] = typeflag
	copy(blk[257:], "ustar\x0000")
	copy(blk[148:], "        ")
	sum := 0
	for _, b := range blk {
		sum += int(b)
	}
	copy(blk[148:], fmt.Sprintf("%06o\x00 ", sum))
	return blk
}

// padded is data followed by zeros to a whole number of 512-byte blocks.
func padded(data []byte) []byte {
	return append(data, make([]byte, (512-len(data)%512)%512)...)
}

// TestCheckTarballRefusesPAXSparse: a GNU sparse file in the PAX 1.0 form (what GNU tar
// --sparse --format=posix writes), 64 GiB once expanded, is refused by its header alone.
func TestCheckTarballRefusesPAXSparse(t *testing.T) {
	var records string
	for _, kv := range [][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"}, {"GNU.sparse.name", listingName}, {"GNU.sparse.realsize", "68719476736"}} {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec) + 2
		records += fmt.Sprintf("%d%s", n, rec)
	}
	sparseMap := make([]byte, 512)
	copy(sparseMap, "1\n68719476735\n1\n") // one chunk: the last byte
	data := append(sparseMap, '{')
	var buf bytes.Buffer
	buf.Write(ustarBlock("PaxHeaders/"+listingName, 'x', len(records)))
	buf.Write(padded([]byte(records)))
	buf.Write(ustarBlock("GNUSparseFile.0/"+listingName, '0', len(data)))
	buf.Write(padded(data))
	buf.Write(make([]byte, 1024))
	p := filepath.Join(t.TempDir(), "pax.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{"Open": open(context.Background(), p), "ReadListing": readListing(context.Background(), p)} {
		if err == nil || !strings.Contains(err.Error(), "a sparse file (GNU sparse PAX record") || !strings.Contains(err.Error(), "68719476736 bytes once expanded") {
			t.Errorf("%s: %v", what, err)
		}
	}
}
