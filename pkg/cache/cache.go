// Package cache is oprov's content-addressed store, shared by every project on the machine and by
// the serving mirror: zips by digest, what each version's index held and who signed it, unpacked
// packages as filesystem mirrors, and builds of providers kept as source.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/oci"
)

// Cache is a content-addressed store shared by every project on the machine:
//
//	blobs/sha256/<hex>                      zips, each complete and checked against its digest
//	versions/<registry>/<repository>/<tag>.json  where a version's index was (a hint, not proof)
//	evidence/                               what checks read: manifests and signature artifacts (evidence.go)
//	mirror/<key>/HOST/NS/TYPE/VERSION/OS_ARCH/  a zip unpacked, as a filesystem mirror
//	builds/<key>/                           providers kept as source, built for this machine
//	tmp/.oprov-tmp-PID-RAND[.lock]          work in progress, one directory per open Cache
//	locks/                                  file locks
//
// An entry appears only once complete (temporary name, then rename), so a process killed at any
// point leaves no partial entry; locks keep concurrent processes from doing the same work twice.
// Work in progress lives in this Cache's own directory under tmp/ (see internal/scratch), locked from
// its first write until Close: whatever a killed process left there is removed by the next Open,
// and a live process's never is.
type Cache struct {
	Dir string

	// Repair makes a zip that no longer matches its digest be removed and fetched again, rather
	// than refused: for a long-running server, which logs what it repaired.
	Repair bool

	mu      sync.Mutex
	tmp     *scratch.Dir  // this Cache's own temporary directory, from first use until Close
	swept   scratch.Swept // what Open removed of processes that are gone
	checked sync.Map      // zip digests re-hashed (or stored) by this Cache

	aboveOnce sync.Once // the directories above the cache checked (launch.go)
	aboveErr  error
}

// DefaultDir is $OPROV_CACHE_DIR, else $XDG_CACHE_HOME/oprov, else ~/.cache/oprov.
func DefaultDir() (string, error) {
	if d := os.Getenv("OPROV_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set OPROV_CACHE_DIR (%w)", err)
	}
	return filepath.Join(d, "oprov"), nil
}

// Open opens (creating) a cache directory and removes the temporary files of processes that are
// gone. Close it when done. The directory is made absolute: paths into the cache end up in
// files read from elsewhere (the CLI configuration, links in .terraform/providers).
func Open(dir string) (*Cache, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", dir, err)
	}
	for _, sub := range []string{"blobs/sha256", "versions", "mirror", "tmp", "locks"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(sub)), 0o755); err != nil {
			return nil, fmt.Errorf("cache %s: %w", dir, err)
		}
	}
	c := &Cache{Dir: dir}
	c.swept = c.sweepTmp(UnownedTempAge)
	return c, nil
}

// Close removes this Cache's temporary directory, if it made one. A process that exits without
// closing leaves it to the next Open.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.tmp.Release()
	c.tmp = nil
	return err
}

// owned gives this Cache's own temporary directory under tmp/, made (and locked for this
// process) on first use: a run that writes nothing makes none.
func (c *Cache) owned() (*scratch.Dir, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tmp == nil {
		root := filepath.Join(c.Dir, "tmp")
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, fmt.Errorf("cache %s: %w", c.Dir, err)
		}
		d, err := scratch.Claim(root)
		if err != nil {
			return nil, fmt.Errorf("cache %s: %w", c.Dir, err)
		}
		c.tmp = d
	}
	return c.tmp, nil
}

// TmpDir is where work in progress lives until it is renamed into place: this Cache's own
// directory under tmp/, on the cache's file system.
func (c *Cache) TmpDir() (string, error) {
	d, err := c.owned()
	if err != nil {
		return "", err
	}
	return d.Path, nil
}

// ownTmp is the path of this Cache's temporary directory, or "" if it has made none.
func (c *Cache) ownTmp() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tmp == nil {
		return ""
	}
	return c.tmp.Path
}

// UnownedTempAge is how old a file in tmp/ without an owner (left by an oprov from before owned
// temporary directories) must be before it is removed: its writer cannot be told apart.
const UnownedTempAge = time.Hour

// sweepTmp removes the owner directories of processes that are gone, and unowned entries older
// than age.
func (c *Cache) sweepTmp(age time.Duration) scratch.Swept {
	root := filepath.Join(c.Dir, "tmp")
	s := scratch.Sweep(root)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if scratch.IsOwned(e.Name()) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > age {
			size, _ := scratch.Usage(filepath.Join(root, e.Name()))
			if os.RemoveAll(filepath.Join(root, e.Name())) == nil {
				s.Add(scratch.Swept{Owners: 1, Bytes: size})
			}
		}
	}
	return s
}

// Swept says what Open removed of temporary files whose processes are gone.
func (c *Cache) Swept() scratch.Swept { return c.swept }

// markUsed records that an entry (a path under the cache) was just used, for reports and
// pruning by age: its modification time is the time of its last use, to the minute (so that runs
// in quick succession write nothing).
func (c *Cache) markUsed(path string) {
	if st, err := os.Stat(path); err == nil {
		c.touch(path, st)
	}
}

func (c *Cache) touch(path string, st os.FileInfo) {
	if now := time.Now(); now.Sub(st.ModTime()) >= time.Minute {
		os.Chtimes(path, now, now)
	}
}

// lock takes an exclusive file lock named name, waiting for other processes.
func (c *Cache) lock(ctx context.Context, name string) (func(), error) {
	fl := flock.New(filepath.Join(c.Dir, "locks", name+".lock"))
	ok, err := fl.TryLockContext(ctx, 20*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("locking the cache (%s): %w", name, err)
	}
	if !ok {
		return nil, fmt.Errorf("locking the cache (%s): not acquired", name)
	}
	return func() { fl.Unlock() }, nil
}

// blobPath is where a zip with digest d lives in the cache.
func (c *Cache) blobPath(d digest.Digest) string {
	return filepath.Join(c.Dir, "blobs", string(d.Algorithm()), d.Encoded())
}

// HasZip reports whether the cache holds a zip (unchecked: PutZip checks it before use).
func (c *Cache) HasZip(d digest.Digest) bool {
	st, err := os.Stat(c.blobPath(d))
	return err == nil && st.Mode().IsRegular()
}

// putBlob stores a zip, written by fetch and checked against d and size (unless size is -1, for
// unknown), unless the cache has it.
func (c *Cache) putBlob(ctx context.Context, d digest.Digest, size, maxSize int64, fetch func(io.Writer) error) error {
	if err := d.Validate(); err != nil || d.Algorithm() != digest.SHA256 {
		return fmt.Errorf("cache: unsupported digest %q", d)
	}
	dest := c.blobPath(d)
	unlock, err := c.lock(ctx, "blob-"+d.Encoded())
	if err != nil {
		return err
	}
	defer unlock()
	if c.HasZip(d) { // another process stored it while this one waited
		return c.checkBlob(d)
	}
	tmp, err := c.TmpDir()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(tmp, "blob-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	h := sha256.New()
	cw := &iox.CountingWriter{W: io.MultiWriter(f, h)}
	max := size
	if max < 0 {
		max = maxSize
	}
	err = fetch(&capWriter{w: cw, left: max, max: max})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := digest.NewDigestFromEncoded(digest.SHA256, hex.EncodeToString(h.Sum(nil))); got != d || (size >= 0 && cw.N != size) {
		return fmt.Errorf("downloaded zip is %s (%d bytes), want %s (%d bytes)", got, cw.N, d, size)
	}
	if err := os.Chmod(f.Name(), 0o444); err != nil {
		return err
	}
	return os.Rename(f.Name(), dest)
}

// capWriter refuses to write more than left bytes: a zip never grows past what its descriptor
// (or the maximum package size) says.
type capWriter struct {
	w         io.Writer
	left, max int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		return 0, fmt.Errorf("the zip is larger than the %d bytes expected: nothing was kept", c.max)
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// checkBlobOnce re-hashes a cached zip the first time this Cache uses it, and compares it with
// d: a cache on disk can be tampered with.
func (c *Cache) checkBlobOnce(d digest.Digest) error {
	c.markUsed(c.blobPath(d))
	if _, ok := c.checked.Load(d); ok {
		return nil
	}
	if err := c.checkBlob(d); err != nil {
		return err
	}
	c.checked.Store(d, true)
	return nil
}

func (c *Cache) checkBlob(d digest.Digest) error {
	got, err := sha256File(c.blobPath(d))
	if err != nil {
		return err
	}
	if got != d.Encoded() {
		return fmt.Errorf("cached zip %s %w (it now hashes to sha256:%s): run 'oprov cache verify --fix' to remove the damaged entries of %s", d, ErrDamaged, got, c.Dir)
	}
	return nil
}

// VersionMeta is what the cache remembers of a version: enough to install it with no network.
type VersionMeta struct {
	Repository string                   `json:"repository"`
	Tag        string                   `json:"tag"`
	Version    string                   `json:"version"`
	Index      digest.Digest            `json:"index_digest"`
	Platforms  map[string]*PlatformMeta `json:"platforms"`
}

// PlatformMeta is one platform of a cached version.
type PlatformMeta struct {
	Manifest digest.Digest `json:"manifest_digest"`
	Zip      digest.Digest `json:"zip_digest"`
	Size     int64         `json:"size"`
	Filename string        `json:"filename"`
	H1       string        `json:"h1,omitempty"` // computed once the zip is in the cache
}

func (c *Cache) metaPath(repo oci.Ref, tag string) string {
	safe := strings.NewReplacer(":", "_").Replace(repo.Registry)
	return filepath.Join(c.Dir, "versions", safe, filepath.FromSlash(repo.Repository), tag+".json")
}

// ReadMeta reads a version's metadata; a missing entry gives (nil, nil).
func (c *Cache) ReadMeta(repo oci.Ref, tag string) (*VersionMeta, error) {
	data, err := os.ReadFile(c.metaPath(repo, tag))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m VersionMeta
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, nil // a damaged entry is as good as none: it is fetched again
	}
	c.markUsed(c.metaPath(repo, tag))
	return &m, nil
}

// WriteMeta stores a version's metadata atomically. The repository's parts and the tag name
// directories and a file of the cache: each must be one path component, and the write goes
// through an os.Root on the cache.
func (c *Cache) WriteMeta(repo oci.Ref, m *VersionMeta) error {
	if err := checkRepoNames(repo, m.Tag); err != nil {
		return err
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return c.writeFile(c.metaPath(repo, m.Tag), func(w io.Writer) error { _, err := w.Write(data); return err })
}

// checkRepoNames refuses a repository (its registry and each part of its path) or a tag that is
// not one path component each, naming which. A layout's reference has neither registry nor
// repository.
func checkRepoNames(repo oci.Ref, tag string) error {
	if !repo.IsLayout() {
		if err := iox.CheckComponent(repo.Registry); err != nil {
			return fmt.Errorf("cache: the registry of %s/%s cannot name a directory of the cache: %v; refused, nothing was written", repo.Registry, repo.Repository, err)
		}
		for _, part := range strings.Split(repo.Repository, "/") {
			if err := iox.CheckComponent(part); err != nil {
				return fmt.Errorf("cache: the repository %q cannot name directories of the cache: %v; refused, nothing was written", repo.Repository, err)
			}
		}
	}
	if !validTag(tag) {
		return fmt.Errorf("cache: tag %q of %s/%s is not a valid tag (one path component, at most 128 characters): refused, nothing was written", tag, repo.Registry, repo.Repository)
	}
	return nil
}

// writeFile writes dest, a path below the cache's directory, through this Cache's temporary
// directory: its parents are made and it is renamed into place through an os.Root on the cache,
// so no name in it (nor a link planted in the cache) can lead the write out of the cache.
func (c *Cache) writeFile(dest string, write func(io.Writer) error) error {
	d, err := c.owned()
	if err != nil {
		return err
	}
	rel, err := c.rel(dest)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return fmt.Errorf("cache: writing %s: %w", dest, err)
	}
	return d.WriteFileIn(root, rel, write)
}

// renameIn renames from to to, both below the cache's directory, through an os.Root on it.
func (c *Cache) renameIn(from, to string) error {
	relFrom, err := c.rel(from)
	if err != nil {
		return err
	}
	relTo, err := c.rel(to)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Rename(relFrom, relTo); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// rel is p relative to the cache's directory; p must be below it.
func (c *Cache) rel(p string) (string, error) {
	rel, err := filepath.Rel(c.Dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("cache: %s is not below the cache %s: refused", p, c.Dir)
	}
	return rel, nil
}
