package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/oprov/oprov/internal/iox"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/pkghash/unzip"
)

// Judge decides on the h1: hash of a package about to be used, as computed in this call. An
// error refuses the package; vouched says that something the caller trusts (a lock file's h1:
// hashes) records exactly this hash.
type Judge func(h1 string) (vouched bool, err error)

// Zip is a package's zip in the cache, checked against its digest by this Cache.
type Zip struct {
	Path    string
	H1      string // the h1: of its contents, when asked for
	Fetched bool   // it was downloaded in this call
	// Repaired says the cached copy no longer matched its digest and was fetched again (Repair).
	Repaired bool
}

// Installed is a package unpacked in the cache as a filesystem mirror, its files checked in this
// call against a hash that the caller's judge, the source's signed statement, or the verified zip
// vouches for.
type Installed struct {
	Root       string // the filesystem mirror: Root/HOST/NS/TYPE/VERSION/OS_ARCH
	Dir        string // the package's own directory under Root
	Executable string // the terraform-provider-TYPE executable in Dir
	H1         string
	Fetched    bool // its zip was downloaded in this call
	Built      bool // it was made from source in this call

	stamps []fileStamp // Dir's files as checked in this call (unpacked entries), for exe
	exe    *fileStamp  // Executable as checked in this call; nil for a build (launch.go)
}

// ErrDamaged marks a cache entry whose bytes no longer match what they were checked against when
// stored.
var ErrDamaged = errors.New("was changed on disk")

// Install is the one door into the cache for a provider package, downloaded or built. A build
// (pkg.Build) is made once under its key and sealed (installBuild). For an archive, it makes sure the zip is there
// (fetched by digest unless cached; a cached one re-hashed once per Cache), unpacks it safely as
// a filesystem mirror unless that is there already, hashes the unpacked files (h1:), and checks
// that hash before returning: against the source's own statement (pkg.H1), then judge; when
// judge does not vouch for it, an entry unpacked earlier must also match its zip. A package
// unpacked from one zip never stands for another: entries are keyed by the zip's digest and the
// provider's name, version and platform, and their files are hashed on every use. Nothing that
// fails a check is left in place of a good entry; a changed entry is refused with how to clear it.
func (c *Cache) Install(ctx context.Context, pkg *Package, judge Judge, progress oci.Progress) (*Installed, error) {
	if pkg.Build != nil {
		return c.installBuild(ctx, pkg)
	}
	pkg = pkg.reporting(progress)
	if judge == nil {
		judge = func(string) (bool, error) { return false, nil }
	}
	if err := checkNames(pkg); err != nil {
		return nil, err
	}
	in := &Installed{Root: c.mirrorRoot(pkg)}
	in.Dir = filepath.Join(in.Root, mirrorPath(pkg.Addr, pkg.Version, pkg.Platform))
	if err := c.checkPrivate(in.Dir, true); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg.name(), err)
	}
	var err error
	if c.hasDir(in.Root) {
		err = c.checkUnpacked(ctx, pkg, in, judge)
	} else {
		err = c.unpack(ctx, pkg, in, judge)
	}
	if err != nil {
		return nil, err
	}
	if in.Executable, err = findExecutable(in.Dir, pkg.Addr.Type); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg.name(), err)
	}
	if err := in.pinExecutable(); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg.name(), err)
	}
	return in, nil
}

// unpack fetches the zip and unpacks it under tmp/, computing its h1: while writing, and renames
// it into place only once the hash passes.
func (c *Cache) unpack(ctx context.Context, pkg *Package, in *Installed, judge Judge) error {
	z, err := c.PutZip(ctx, pkg, false, nil)
	if err != nil {
		return err
	}
	in.Fetched = z.Fetched
	unlock, err := c.lock(ctx, "mirror-"+filepath.Base(in.Root))
	if err != nil {
		return err
	}
	defer unlock()
	if c.hasDir(in.Root) { // another process unpacked it while this one waited
		return c.checkUnpacked(ctx, pkg, in, judge)
	}
	tmpRoot, err := c.TmpDir()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(tmpRoot, "mirror-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer root.Close()
	rel := mirrorPath(pkg.Addr, pkg.Version, pkg.Platform)
	var refused error // the judge's own errors are returned as they are
	check := func(h1 string) error {
		in.H1 = h1
		if pkg.H1 != "" && h1 != pkg.H1 {
			refused = lieError(pkg, h1)
		} else {
			_, refused = judge(h1)
		}
		return refused
	}
	// The package's names are written through root: checkNames refused what is not one path
	// component each, and root refuses anything that would still leave tmp.
	if err := unzip.ExtractIn(ctx, z.Path, root, rel, unzip.DefaultLimits, check); err != nil {
		if refused != nil {
			return refused
		}
		return fmt.Errorf("%s: %w", pkg.name(), err)
	}
	// The files as this call wrote them, in this process's own directory: the rename moves the
	// directory above them, which changes none of their fingerprints.
	if in.stamps, err = stampDir(filepath.Join(tmp, rel)); err != nil && haveStamps {
		return fmt.Errorf("%s: %w", pkg.name(), err)
	}
	if err := root.WriteFile(unpackedSum, []byte(in.H1+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return c.renameIn(tmp, in.Root)
}

// checkNames refuses a package whose address, version or platform is not one path component
// each: they name the directories of its filesystem mirror (mirrorPath). Their parsers refuse
// such names where they enter; this is for a caller that built a Package by hand.
func checkNames(pkg *Package) error {
	for _, n := range []struct{ what, name string }{
		{"hostname", pkg.Addr.Hostname.String()}, {"namespace", pkg.Addr.Namespace}, {"type", pkg.Addr.Type},
		{"version", pkg.Version}, {"platform's OS", pkg.Platform.OS}, {"platform's architecture", pkg.Platform.Arch},
	} {
		if err := iox.CheckComponent(n.name); err != nil {
			return fmt.Errorf("%s %s: the provider's %s cannot name a directory of the cache: %v; refused, nothing was installed", pkg.Addr, pkg.Version, n.what, err)
		}
	}
	return nil
}

// checkUnpacked hashes an entry unpacked earlier and checks it as unpack checks a fresh one. A
// record of an earlier check is never taken as proof: the files are hashed now.
func (c *Cache) checkUnpacked(ctx context.Context, pkg *Package, in *Installed, judge Judge) error {
	got, hashed, err := c.unpackedH1(in)
	if err != nil {
		return fmt.Errorf("%s: the cache's unpacked package %s cannot be read (%v): run 'oprov cache verify --fix' to remove it", pkg.name(), in.Root, err)
	}
	in.H1 = got
	if err := c.judgeUnpacked(ctx, pkg, in, judge); err != nil {
		return err
	}
	if hashed {
		c.recordFingerprint(in.Root, in.Dir, got, in.stamps)
	}
	return nil
}

// unpackedH1 is the h1: of an unpacked entry's files: as fingerprinted, when every file is exactly
// as it was when last hashed (fingerprint.go), else hashed now; hashed says which. It sets
// in.stamps to the files' fingerprints as checked, when they are known to be the ones the h1:
// describes: no file changed while it hashed (else nil, and the entry cannot be launched).
func (c *Cache) unpackedH1(in *Installed) (h1 string, hashed bool, err error) {
	if h1, now := c.fingerprinted(in.Root, in.Dir); h1 != "" {
		in.stamps = now
		return h1, false, nil
	}
	before, _ := stampDir(in.Dir)
	if h1, err = hashDir(in.Dir); err != nil {
		return "", true, err
	}
	if after, err := stampDir(in.Dir); err == nil && before != nil && sameStamps(before, after) {
		in.stamps = before
	}
	return h1, true, nil
}

// judgeUnpacked checks the h1: of an entry unpacked earlier (in.H1) as unpack checks a fresh one.
func (c *Cache) judgeUnpacked(ctx context.Context, pkg *Package, in *Installed, judge Judge) error {
	got := in.H1
	recorded := c.recordedH1(in.Root)
	if pkg.H1 != "" && got != pkg.H1 {
		if got != recorded {
			return c.damaged(pkg, in, pkg.H1)
		}
		return lieError(pkg, got)
	}
	vouched, err := judge(got)
	if err != nil {
		if got != recorded {
			return c.damaged(pkg, in, recorded)
		}
		return err
	}
	if vouched {
		return nil
	}
	// Nothing the caller trusts names the hash (a source's statement may come from a record on
	// this disk): the zip, checked against its digest, does.
	z, err := c.PutZip(ctx, pkg, true, nil)
	if err != nil {
		return err
	}
	in.Fetched = z.Fetched
	if got != z.H1 {
		return c.damaged(pkg, in, z.H1)
	}
	return nil
}

// damaged is the refusal of an unpacked entry whose files no longer hash to want.
func (c *Cache) damaged(pkg *Package, in *Installed, want string) error {
	return fmt.Errorf("%s: the cache's unpacked package %s %w: its files hash to %s, not to the checksum %s its verified package has, so nothing was used (run 'oprov cache verify --fix' to remove the damaged entries of %s, then run again)",
		pkg.name(), in.Dir, ErrDamaged, in.H1, want, c.Dir)
}

// lieError refuses a package whose source stated another h1: than its zip holds.
func lieError(pkg *Package, h1 string) error {
	return fmt.Errorf("%s: the %s package (%s) hashes to %s, but the version's index records %s for it (%s): it does not describe its own package, so nothing was installed",
		pkg.name(), pkg.Platform, pkg.Zip, h1, pkg.H1, manifest.AnnotationH1)
}

// recordedH1 is the h1: an unpacked entry recorded when it was unpacked: a hint for messages and
// Verify, never a proof.
func (c *Cache) recordedH1(root string) string {
	data, err := os.ReadFile(filepath.Join(root, unpackedSum))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// PutZip makes sure the cache holds a package's zip, checked: a missing one is fetched against its
// digest and size (refused before any byte is fetched when over the maximum package size), a
// cached one is re-hashed the first time this Cache uses it (a cache on disk can be changed). A
// damaged one is refused, or, with Repair, removed and fetched again. With withH1 it also gives
// the h1: of the zip's contents, which must agree with pkg.H1 when the source stated one.
func (c *Cache) PutZip(ctx context.Context, pkg *Package, withH1 bool, progress oci.Progress) (*Zip, error) {
	z, err := c.putZip(ctx, pkg.reporting(progress))
	if err != nil {
		return nil, err
	}
	if withH1 {
		if z.H1, err = pkghash.ZipH1(ctx, z.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", pkg.name(), err)
		}
		if pkg.H1 != "" && z.H1 != pkg.H1 {
			return nil, lieError(pkg, z.H1)
		}
	}
	return z, nil
}

func (c *Cache) putZip(ctx context.Context, pkg *Package) (*Zip, error) {
	z := &Zip{Path: c.blobPath(pkg.Zip)}
	if c.HasZip(pkg.Zip) {
		err := c.checkBlobOnce(pkg.Zip)
		if err == nil || !c.Repair || !errors.Is(err, ErrDamaged) {
			return z, err
		}
		os.Remove(z.Path)
		z.Repaired = true
	}
	// Refused before the cache is touched: a package over the limit is never fetched.
	limits := oci.Limits{MaxPackageSize: pkg.MaxSize}.WithDefaults()
	if err := limits.CheckBlobSize("the "+pkg.Filename+" package", pkg.Size); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg.name(), err)
	}
	if err := c.putBlob(ctx, pkg.Zip, pkg.Size, limits.MaxPackageSize, func(w io.Writer) error { return pkg.Fetch(ctx, w, nil) }); err != nil {
		return nil, fmt.Errorf("%s: %w", pkg.name(), err)
	}
	c.checked.Store(pkg.Zip, true) // checked on its way in
	z.Fetched = true
	return z, nil
}

// mirrorPath is where a filesystem mirror holds a provider's unpacked package, relative to the
// mirror: HOST/NAMESPACE/TYPE/VERSION/OS_ARCH, the layout OpenTofu and Terraform read (and the one
// of their own provider directory, .terraform/providers).
func mirrorPath(addr manifest.ProviderAddress, version string, p manifest.Platform) string {
	return filepath.Join(addr.Hostname.String(), addr.Namespace, addr.Type, version, p.String())
}

// mirrorRoot is the filesystem-mirror directory holding one zip unpacked as one provider version
// for one platform. The same bytes published under two names get two roots.
func (c *Cache) mirrorRoot(pkg *Package) string {
	key := sha256.Sum256([]byte(pkg.Addr.String() + "\x00" + pkg.Version + "\x00" + pkg.Platform.String()))
	return filepath.Join(c.Dir, "mirror", pkg.Zip.Encoded()[:32]+"-"+hex.EncodeToString(key[:8]))
}

// unpackedSum is the file at the top of an unpacked entry that records the h1: of the zip it was
// unpacked from, for Verify. OpenTofu's (and Terraform's) filesystem-mirror search ignores files
// less than three levels deep.
const unpackedSum = ".oprov-h1"

// hasDir reports whether an entry's directory is in the cache, and marks it used.
func (c *Cache) hasDir(root string) bool {
	st, err := os.Stat(root)
	if err != nil || !st.IsDir() {
		return false
	}
	c.touch(root, st)
	return true
}

// hashDir is the h1: hash of an unpacked package, as OpenTofu computes it for a directory.
func hashDir(dir string) (string, error) { return dirhash.HashDir(dir, "", dirhash.Hash1) }

// findExecutable finds a provider's executable in its unpacked package: the regular file whose
// name starts with terraform-provider-TYPE.
func findExecutable(dir, typ string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	ne := &NoExecutableError{Dir: dir, Type: typ}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), "terraform-provider-"+typ) {
			return filepath.Join(dir, e.Name()), nil
		}
		if t, ok := strings.CutPrefix(e.Name(), "terraform-provider-"); ok && e.Type().IsRegular() && ne.Holds == "" {
			// terraform-provider-TYPE_vVERSION (or .exe): the type a package says it is.
			t, _, _ = strings.Cut(strings.TrimSuffix(t, ".exe"), "_")
			ne.Holds = t
		}
	}
	return "", ne
}

// NoExecutableError is a package that holds no executable for the type it was installed as:
// most often the type was guessed wrong. Holds is the type of the executable it does hold.
type NoExecutableError struct {
	Dir, Type, Holds string
}

func (e *NoExecutableError) Error() string {
	msg := fmt.Sprintf("%s holds no terraform-provider-%s executable", e.Dir, e.Type)
	if e.Holds != "" {
		msg += fmt.Sprintf(" (it holds terraform-provider-%s's)", e.Holds)
	}
	return msg
}

// buildDir is where the cache keeps one build of a provider kept as source, by its key.
func (c *Cache) buildDir(key string) string { return filepath.Join(c.Dir, "builds", key) }
