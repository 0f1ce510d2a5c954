package cache

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The launch check proves an unpacked package's files without hashing them all when nothing
// changed. When a package's files have been hashed (and that hash checked), the cache writes a
// fingerprint of each file: the path, device, inode, size, mode, mtime and ctime, with the h1:
// they hashed to, authenticated with an HMAC key that lives outside the cache (in the user's
// configuration directory, 0600, created on first use and never part of a cache that is copied
// or restored). A later check walks the files, and only if every file's fingerprint is the one
// recorded, the set of files is the same, and the record's MAC checks out with the key, does it
// take the recorded h1: instead of hashing.
//
// Why that is proof, not a hint: the record cannot be forged without the key (someone who can
// write the cache cannot read the user's 0600 key, and a cache restored from elsewhere carries
// records made under another key). The files cannot be changed without changing what the record
// binds: writing a file or changing its mode sets its ctime to the current time, which no system
// call can set back (utimes sets mtime and atime only), and replacing a file gives a new inode or
// ctime; a copy of the cache to a new place (cp -a) has new inodes, so it is hashed once and
// recorded anew. Anything that does not match is hashed as before.

const fingerprintFile = ".oprov-fingerprint"

// fileStamp is what the kernel says of one file.
type fileStamp struct {
	Path  string `json:"p"`
	Dev   uint64 `json:"d"`
	Ino   uint64 `json:"i"`
	Size  int64  `json:"s"`
	Mode  uint32 `json:"m"`
	Mtime int64  `json:"mt"`
	Ctime int64  `json:"ct"`
}

type fingerprint struct {
	Dir   string      `json:"dir"`
	H1    string      `json:"h1"`
	Files []fileStamp `json:"files"`
	MAC   string      `json:"mac"`
}

var (
	keyOnce sync.Once
	keyVal  []byte
)

// fingerprintKey is the user's key for fingerprints, or nil (then everything is hashed): it must
// be a regular file of the user's own, readable by nobody else, outside the cache.
func (c *Cache) fingerprintKey() []byte {
	if !haveStamps {
		return nil
	}
	keyOnce.Do(func() { keyVal = loadFingerprintKey() })
	if keyVal == nil {
		return nil
	}
	if p, err := fingerprintKeyPath(); err != nil || strings.HasPrefix(p, c.Dir+string(filepath.Separator)) {
		return nil
	}
	return keyVal
}

func fingerprintKeyPath() (string, error) {
	if d := os.Getenv("OPROV_STATE_DIR"); d != "" {
		return filepath.Join(d, "fingerprint.key"), nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "oprov", "fingerprint.key"), nil
}

func loadFingerprintKey() []byte {
	p, err := fingerprintKeyPath()
	if err != nil {
		return nil
	}
	if key := readOwnKey(p); key != nil {
		return key
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", p, os.Getpid())
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(key)), 0o600); err != nil {
		return nil
	}
	if err := os.Link(tmp, p); err != nil { // never replaces a key another process made
		os.Remove(tmp)
		return readOwnKey(p)
	}
	os.Remove(tmp)
	return readOwnKey(p)
}

// readOwnKey reads a key only if it is a regular file (not a link) of this user's, mode 0600 or
// stricter.
func readOwnKey(p string) []byte {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil
	}
	if uid, _, ok := ownerOf(st); !ok || uid != os.Geteuid() {
		return nil
	}
	data, err := readSmall(p)
	if err != nil {
		return nil
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < 32 {
		return nil
	}
	return key
}

// stampDir fingerprints every file under dir; it fails on anything but directories and regular
// files.
func stampDir(dir string) ([]fileStamp, error) {
	var out []fileStamp
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return errors.New("not a regular file: " + p)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		st, ok := stampOf(filepath.ToSlash(rel), info)
		if !ok {
			return errors.New("no file status")
		}
		out = append(out, st)
		return nil
	})
	return out, err
}

func (f *fingerprint) mac(key []byte) string {
	body, _ := json.Marshal(fingerprint{Dir: f.Dir, H1: f.H1, Files: f.Files})
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// fingerprinted gives the h1: recorded for dir, and its files' fingerprints as they are now, if
// its record is authentic and every file is exactly as fingerprinted; "" otherwise.
func (c *Cache) fingerprinted(root, dir string) (string, []fileStamp) {
	key := c.fingerprintKey()
	if key == nil {
		return "", nil
	}
	var rec fingerprint
	if !readRecord(filepath.Join(root, fingerprintFile), &rec) || rec.Dir != dir {
		return "", nil
	}
	if !hmac.Equal([]byte(rec.MAC), []byte(rec.mac(key))) {
		return "", nil
	}
	now, err := stampDir(dir)
	if err != nil || !sameStamps(now, rec.Files) {
		return "", nil
	}
	return rec.H1, now
}

// sameStamps reports whether two fingerprints of a directory's files are the same.
func sameStamps(a, b []fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// recordFingerprint records that dir's files, as fingerprinted in files, hash to h1, which the
// caller computed and checked (and found files unchanged while it hashed). Failing to record
// costs a hash next time, nothing more.
func (c *Cache) recordFingerprint(root, dir, h1 string, files []fileStamp) {
	key := c.fingerprintKey()
	if key == nil || files == nil {
		return
	}
	rec := fingerprint{Dir: dir, H1: h1, Files: files}
	rec.MAC = rec.mac(key)
	_ = c.writeRecord(filepath.Join(root, fingerprintFile), rec)
}
