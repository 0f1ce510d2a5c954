package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	"golang.org/x/mod/sumdb/dirhash"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// Problem is an entry that failed Verify.
type Problem struct {
	Entry Entry  `json:"entry"`
	Error string `json:"error"`
}

// VerifyResult says what Verify checked and found.
type VerifyResult struct {
	Checked  int       `json:"checked"`
	Bytes    int64     `json:"bytes"`
	Problems []Problem `json:"problems"`
	// Unchecked lists entries with nothing left to check them against (an unpacked package
	// whose zip and version record are both gone), with the reason.
	Unchecked []Problem `json:"unchecked"`
	// Removed lists the damaged entries removed (with Fix).
	Removed []Entry `json:"removed"`
}

// errUncheckable marks an entry with nothing to check it against.
var errUncheckable = errors.New("nothing left to check it against")

// Verify checks every entry against its digest: each zip is hashed again; each version record
// must parse; each unpacked package must hash (h1:) to what its zip holds; each build's files
// must match the sums recorded when it was built. With fix, damaged entries are removed (an
// install fetches or builds them again). progress, if set, hears the bytes checked.
func (c *Cache) Verify(ctx context.Context, fix bool, progress oci.Progress) (*VerifyResult, error) {
	inv, err := c.List()
	if err != nil {
		return nil, err
	}
	h1s := zipH1s(inv.Entries)
	res := &VerifyResult{Problems: []Problem{}, Unchecked: []Problem{}, Removed: []Entry{}}
	if progress != nil {
		progress.Plan(inv.Size)
	}
	for _, e := range inv.Entries {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		err := c.verifyEntry(e, h1s)
		res.Checked++
		res.Bytes += e.Size
		if progress != nil {
			progress.Advance(e.Size)
		}
		switch {
		case errors.Is(err, errUncheckable):
			res.Unchecked = append(res.Unchecked, Problem{Entry: e, Error: err.Error()})
		case err != nil:
			res.Problems = append(res.Problems, Problem{Entry: e, Error: err.Error()})
			if fix {
				if err := c.remove(ctx, e); err != nil {
					return res, err
				}
				res.Removed = append(res.Removed, e)
			}
		}
	}
	return res, nil
}

// zipH1s gives, by hex zip digest, the h1: hash version records remember for each zip.
func zipH1s(entries []Entry) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		if e.Kind != kindVersion {
			continue
		}
		data, err := os.ReadFile(e.Path)
		var m VersionMeta
		if err != nil || json.Unmarshal(data, &m) != nil {
			continue
		}
		for _, pm := range m.Platforms {
			if pm.H1 != "" && pm.Zip != "" { // h1: can be known (from the index) before the zip is
				out[pm.Zip.Encoded()] = pm.H1
			}
		}
	}
	return out
}

func (c *Cache) verifyEntry(e Entry, h1s map[string]string) error {
	switch e.Kind {
	case kindZip:
		d := digest.Digest(e.Name)
		if d.Validate() != nil || d.Algorithm() != digest.SHA256 {
			return fmt.Errorf("%s is not named by a sha256 digest", e.Path)
		}
		return c.checkBlob(d)
	case kindVersion:
		return verifyVersion(e)
	case kindUnpacked:
		return c.verifyUnpacked(e, h1s)
	case kindBuild:
		return verifyBuild(e)
	case kindEvidence:
		return verifyEvidence(e)
	}
	return nil
}

func verifyVersion(e Entry) error {
	data, err := os.ReadFile(e.Path)
	if err != nil {
		return err
	}
	var m VersionMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("version record %s is damaged: %v", e.Path, err)
	}
	if err := m.Index.Validate(); err != nil {
		return fmt.Errorf("version record %s: index digest: %v", e.Path, err)
	}
	for p, pm := range m.Platforms { // a platform not fetched yet has no zip digest
		if pm == nil || pm.Manifest.Validate() != nil || (pm.Zip != "" && pm.Zip.Validate() != nil) {
			return fmt.Errorf("version record %s: platform %s has a bad digest", e.Path, p)
		}
	}
	return nil
}

// verifyUnpacked compares an unpacked package's h1: with its zip's: as recorded when it was
// unpacked, else the zip's own if the cache still holds it, else what a version record remembers.
func (c *Cache) verifyUnpacked(e Entry, h1s map[string]string) error {
	pkg, ok := unpackedPackage(e.Path)
	if !ok {
		return fmt.Errorf("unpacked entry %s does not hold exactly one package", e.Path)
	}
	want, err := c.unpackedFrom(e, h1s)
	if err != nil {
		return err
	}
	got, err := dirhash.HashDir(pkg, "", dirhash.Hash1)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("unpacked package %s was changed on disk: it hashes to %s, its zip to %s", pkg, got, want)
	}
	return nil
}

// unpackedFrom gives the h1: of the zip an unpacked entry came from.
func (c *Cache) unpackedFrom(e Entry, h1s map[string]string) (string, error) {
	if data, err := os.ReadFile(filepath.Join(e.Path, unpackedSum)); err == nil {
		if h1 := strings.TrimSpace(string(data)); strings.HasPrefix(h1, "h1:") {
			return h1, nil
		}
		return "", fmt.Errorf("unpacked entry %s: %s is damaged", e.Path, unpackedSum)
	}
	blobs, _ := filepath.Glob(filepath.Join(c.Dir, "blobs", "sha256", e.zipPrefix+"*"))
	for _, b := range blobs {
		if h1, err := pkghash.ZipH1(context.Background(), b); err == nil {
			return h1, nil
		}
	}
	for z, h1 := range h1s {
		if e.zipPrefix != "" && strings.HasPrefix(z, e.zipPrefix) {
			return h1, nil
		}
	}
	return "", fmt.Errorf("%w: unpacked before oprov recorded sums, and its zip and version record are gone", errUncheckable)
}

func verifyBuild(e Entry) error {
	f, err := os.Open(filepath.Join(e.Path, sumsFile))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: built before oprov recorded sums", errUncheckable)
	}
	if err != nil {
		return err
	}
	sums, err := providerrelease.ParseSums(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("build %s: %s: %v", e.Path, sumsFile, err)
	}
	for name, want := range sums {
		got, err := sha256File(filepath.Join(e.Path, name))
		if err != nil {
			return fmt.Errorf("build %s: %v", e.Path, err)
		}
		if got != want {
			return fmt.Errorf("build %s: %s was changed on disk (sha256:%s, built as sha256:%s)", e.Path, name, got, want)
		}
	}
	return nil
}

// verifyEvidence checks that every piece of evidence hashes to its name. (Whether it proves
// anything is for the verifier to say, under a policy: cache verify --key/--policy.)
func verifyEvidence(e Entry) error {
	dir := filepath.Join(e.Path, "blobs", "sha256")
	names, err := readDir(dir)
	if err != nil {
		return err
	}
	var bad []string
	for _, n := range names {
		got, err := sha256File(filepath.Join(dir, n.Name()))
		if err != nil || got != n.Name() {
			bad = append(bad, "sha256:"+n.Name())
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("evidence %s %w", strings.Join(bad, ", "), ErrDamaged)
	}
	return nil
}
