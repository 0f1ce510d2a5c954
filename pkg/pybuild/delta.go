package pybuild

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/oprov/oprov/internal/bindelta"
	"github.com/oprov/oprov/internal/iox"
)

// deltasFile, in a lib/cpXY set, lists the compiled extensions stored as deltas against the
// base set's: the launcher rebuilds each once into the user's cache, checks its SHA-256 on
// every launch, and imports it from there.
const deltasFile = "oprov-deltas.json"

// deltaSuffix ends the name of an extension stored as a delta, in place of the extension.
const deltaSuffix = ".oprov-delta"

// A deltaEntry is one extension of a set stored as a delta.
type deltaEntry struct {
	Module string `json:"module"` // its import name, grpc._cython.cygrpc
	File   string `json:"file"`   // its path in the set, slash-separated
	Base   string `json:"base"`   // the base extension, relative to lib/ (cp313/grpc/...)
	SHA256 string `json:"sha256"` // of the rebuilt extension
	Size   int64  `json:"size"`
}

const (
	// minDeltaFile is the smallest extension worth a delta: below it the zip saves little.
	minDeltaFile = 256 << 10
	// maxDeltaShare is how large a delta may be, against its extension as the zip would store it,
	// to be used: a rebuild costs the first launch about 0.1 s.
	maxDeltaShare = 0.5
)

// loadsBeside reports whether the extension at path loads libraries by paths relative to itself,
// which would not resolve once it is rebuilt elsewhere: an ELF search path with $ORIGIN
// (auditwheel's ../NAME.libs), a Mach-O library or search path with @loader_path or @rpath
// (delocate's .dylibs). A file it cannot read as either counts as doing so.
func loadsBeside(path string) bool {
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
			paths, err := f.DynString(tag)
			if err != nil {
				return true
			}
			for _, p := range paths {
				if strings.Contains(p, "ORIGIN") {
					return true
				}
			}
		}
		return false
	}
	var files []*macho.File
	if fat, err := macho.OpenFat(path); err == nil {
		defer fat.Close()
		for _, a := range fat.Arches {
			files = append(files, a.File)
		}
	} else if f, err := macho.Open(path); err == nil {
		defer f.Close()
		files = append(files, f)
	} else {
		return true
	}
	for _, f := range files {
		libs, err := f.ImportedLibraries()
		if err != nil {
			return true
		}
		for _, l := range f.Loads {
			if r, ok := l.(*macho.Rpath); ok {
				libs = append(libs, r.Path)
			}
		}
		for _, l := range libs {
			if strings.HasPrefix(l, "@loader_path") || strings.HasPrefix(l, "@rpath") || strings.HasPrefix(l, "@executable_path") {
				return true
			}
		}
	}
	return false
}

// deflatedSize is the size of b as a zip stores it (deflate, default level).
func deflatedSize(b []byte) int {
	n := &iox.CountingWriter{W: io.Discard}
	w, _ := flate.NewWriter(n, flate.DefaultCompression)
	w.Write(b)
	w.Close()
	return int(n.N)
}

// abiTag is the CPython version in an extension's file name: cygrpc.cpython-311-x86_64-linux-gnu.so.
var abiTag = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\.cpython-3\d+`) })

// deltaExtensions stores each large compiled extension of every claimed version's set but the
// newest as a delta against the newest set's build of the same extension (the same module for
// another CPython, mostly the same machine code), when that is much smaller: grpcio's extension
// is about 7 MiB compressed per version on linux_amd64, its delta about 1.7 MiB. Each delta is checked to
// rebuild the extension before the extension is removed. The sets list their deltas in
// deltasFile.
func deltaExtensions(lib string, versions []string) error {
	if len(versions) < 2 {
		return nil
	}
	base := versions[len(versions)-1]
	baseTag := "cpython-" + strings.TrimPrefix(cpTag(base), "cp")
	for _, v := range versions[:len(versions)-1] {
		set := filepath.Join(lib, cpTag(v))
		var entries []deltaEntry
		err := filepath.WalkDir(set, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".so") || !abiTag().MatchString(d.Name()) {
				return err
			}
			info, err := d.Info()
			if err != nil || !info.Mode().IsRegular() || info.Size() < minDeltaFile {
				return err
			}
			if strings.HasPrefix(d.Name(), "__init__.") || loadsBeside(p) {
				// A compiled package __init__ would make its package a namespace one, and an
				// extension that loads libraries from beside itself finds none in the cache.
				return nil
			}
			rel, _ := filepath.Rel(set, p)
			baseRel := filepath.Join(filepath.Dir(rel), abiTag().ReplaceAllString(d.Name(), "."+baseTag))
			e, ok, err := deltaOne(p, filepath.Join(lib, cpTag(base), baseRel))
			if err != nil || !ok {
				return err
			}
			e.File = filepath.ToSlash(rel)
			e.Base = cpTag(base) + "/" + filepath.ToSlash(baseRel)
			e.Module = strings.SplitN(d.Name(), ".", 2)[0]
			if dir := filepath.Dir(rel); dir != "." {
				e.Module = strings.ReplaceAll(filepath.ToSlash(dir), "/", ".") + "." + e.Module
			}
			entries = append(entries, e)
			return nil
		})
		if err != nil {
			return fmt.Errorf("storing the extensions of CPython %s as deltas: %w", v, err)
		}
		if len(entries) == 0 {
			continue
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].File < entries[j].File })
		data, err := json.MarshalIndent(entries, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(set, deltasFile), append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// deltaOne replaces the extension at path by a delta against base when base exists and the
// delta is small enough, and tells whether it did.
func deltaOne(path, base string) (deltaEntry, bool, error) {
	b, err := os.ReadFile(base)
	if os.IsNotExist(err) {
		return deltaEntry{}, false, nil
	}
	if err != nil {
		return deltaEntry{}, false, err
	}
	t, err := os.ReadFile(path)
	if err != nil {
		return deltaEntry{}, false, err
	}
	d, err := bindelta.Encode(b, t)
	if err != nil {
		return deltaEntry{}, false, err
	}
	if float64(len(d)) > maxDeltaShare*float64(deflatedSize(t)) {
		return deltaEntry{}, false, nil
	}
	back, err := bindelta.Apply(b, d, len(t))
	if err != nil || !bytes.Equal(back, t) {
		return deltaEntry{}, false, fmt.Errorf("the delta of %s does not rebuild it (%v)", path, err)
	}
	if err := os.WriteFile(path+deltaSuffix, d, 0o644); err != nil {
		return deltaEntry{}, false, err
	}
	if err := os.Remove(path); err != nil {
		return deltaEntry{}, false, err
	}
	sum := sha256.Sum256(t)
	return deltaEntry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(t))}, true, nil
}

// deltaBootstrap is the Python the launcher runs, before the provider's code, in a set that has a
// deltasFile (d is the set's directory). Each extension listed is rebuilt once from the base set's
// and its delta into PLACE/ext/SHA256/NAME, PLACE being the first of placeBootstrap's places
// (CACHE/oprov-python, then $TMPDIR/oprov-python-UID) that passes its checks and whose ext and
// ext/SHA256 are real directories (not links) of this user's alone, writable by no one else. The cached file is opened without following links and its SHA-256 checked on every
// launch, in a thread while the provider imports its other modules (the finder waits for the
// answer before the file is loaded); one that does not match is rebuilt (written to a fresh
// temporary name, then renamed), never loaded. A rebuild that does not match, a damaged list or no usable directory stops the
// launch with one line on stderr and stdout (where tofu quotes it, as the launcher's own
// failures). A finder first on sys.meta_path then loads each such module from its file. (No
// single quote: it stands inside the shell script's single quotes.)
const deltaBootstrap = `import os
if os.path.exists(d + "/` + deltasFile + `"):
    def _oprov_fail(msg):
        msg = sys.argv[0] + ": " + msg
        print(msg, flush=True)
        print(msg, file=sys.stderr, flush=True)
        raise SystemExit(1)
    def _oprov_apply(base, delta):
        import zlib, struct
        with open(base, "rb") as f:
            b = f.read()
        with open(delta, "rb") as f:
            z = f.read()
        if z[:8] != b"` + bindelta.Magic + `":
            raise ValueError(delta + " is not a delta")
        p, s = 8, []
        for _ in range(2):
            n = int.from_bytes(z[p:p + 4], "little")
            s.append(zlib.decompress(z[p + 4:p + 4 + n]))
            p += 4 + n
        ops, lits, x = s[0], s[1], zlib.decompress(z[p:])
        out, li, xi, pos = bytearray(), 0, 0, 0
        for ins, cp, off in struct.iter_unpack("<IIi", ops):
            out += lits[li:li + ins]
            li += ins
            pos += off
            if cp:
                # base + difference, byte by byte (mod 256), on whole runs at once: the low
                # seven bits of each byte add without carrying out of it, the top bit is then
                # the XOR of both top bits and that carry.
                a = int.from_bytes(b[pos:pos + cp], "little")
                y = int.from_bytes(x[xi:xi + cp], "little")
                h = int.from_bytes(b"\x80" * cp, "little")
                lo = h - (h >> 7)
                out += (((a & lo) + (y & lo)) ^ ((a ^ y) & h)).to_bytes(cp, "little")
                xi += cp
                pos += cp
        return bytes(out)
    def _oprov_ext(d):
        import json, hashlib, stat, threading
        from importlib.machinery import ExtensionFileLoader, ModuleSpec
        lib = d.rpartition("/")[0]
        with open(d + "/` + deltasFile + `") as f:
            entries = json.load(f)
        def place(e):
            # The first place whose directories are of this user alone, and the cached file
            # there, opened without following links, when it is a regular file of this user.
            for top in _oprov_places():
                if not (_oprov_own(top + "/ext") and _oprov_own(top + "/ext/" + e["sha256"])):
                    continue
                p = top + "/ext/" + e["sha256"] + "/" + e["file"].rpartition("/")[2]
                try:
                    f = os.fdopen(os.open(p, os.O_RDONLY | os.O_NOFOLLOW), "rb")
                except OSError:
                    return p, None
                st = os.fstat(f.fileno())
                if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                    return p, f
                f.close()
                return p, None
            _oprov_fail("no place to keep the extension " + e["module"] + " rebuilt: neither " + " nor ".join(_oprov_cands) + " is a directory of this user alone that no one else can write or replace (set XDG_CACHE_HOME or TMPDIR to one)")
        def rebuild(e, p):
            try:
                data = _oprov_apply(lib + "/" + e["base"], d + "/" + e["file"] + "` + deltaSuffix + `")
            except Exception as err:
                data = str(err).encode()
            if hashlib.sha256(data).hexdigest() != e["sha256"]:
                _oprov_fail("the packaged extension " + e["module"] + " does not rebuild to its SHA-256: the package is damaged; install it again")
            import tempfile
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p))
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, p)
            except BaseException:
                os.unlink(tmp)
                raise
        def check(f, sha, box):
            with f:
                box.append(hashlib.file_digest(f, "sha256").hexdigest() == sha)
        mods, checks = {}, {}
        for e in entries:
            sha, rel, base = e["sha256"], e["file"], e["base"]
            if len(sha) != 64 or sha.strip("0123456789abcdef") or not rel.endswith(".so") or base.startswith("/") or rel.startswith("/") or ".." in (base + "/" + rel).split("/"):
                _oprov_fail("the packaged list of extensions " + d + "/` + deltasFile + ` is damaged: install the provider again")
            p, f = place(e)
            mods[e["module"]] = (e, p)
            if f is None:
                rebuild(e, p)  # the first launch: rebuilt before the provider starts
                continue
            # A cached file is checked while the provider imports its other modules (hashlib
            # lets go of the GIL); the finder waits for the answer before the file is loaded.
            box = []
            t = threading.Thread(target=check, args=(f, sha, box), daemon=True)
            t.start()
            checks[e["module"]] = (t, box)
        class _OprovFinder:
            @staticmethod
            def find_spec(name, path=None, target=None):
                if name not in mods:
                    return None
                e, p = mods[name]
                if name in checks:
                    t, box = checks.pop(name)
                    t.join()
                    if box != [True]:
                        try:
                            rebuild(e, p)  # changed in the cache: rebuilt, never loaded
                        except OSError as err:
                            _oprov_fail("rebuilding the extension " + name + " into " + p + " failed: " + str(err))
                spec = ModuleSpec(name, ExtensionFileLoader(name, p), origin=p)
                spec.has_location = True
                return spec
        sys.meta_path.insert(0, _OprovFinder)
    try:
        _oprov_ext(d)
    except SystemExit:
        raise
    except Exception as err:
        _oprov_fail("preparing the packaged extensions failed: " + repr(err))
`
