package pybuild

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
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

	"github.com/oprov/oprov/internal/bindelta"
	"github.com/oprov/oprov/internal/iox"
)

// DeltasFile, in a lib/cpXY set, lists the compiled extensions stored as deltas against the
// base set's: the launcher rebuilds each once into the user's cache, checks its SHA-256 on
// every launch, and imports it from there.
const DeltasFile = "oprov-deltas.json"

// DeltaSuffix ends the name of an extension stored as a delta, in place of the extension.
const DeltaSuffix = ".oprov-delta"

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

// deflatedSize is the size of b as a zip stores it (deflate, default level).
func deflatedSize(b []byte) int {
	n := &iox.CountingWriter{W: io.Discard}
	w, _ := flate.NewWriter(n, flate.DefaultCompression)
	w.Write(b)
	w.Close()
	return int(n.N)
}

// abiTag is the CPython version in an extension's file name: cygrpc.cpython-311-x86_64-linux-gnu.so.
var abiTag = regexp.MustCompile(`\.cpython-3\d+`)

// deltaExtensions stores each large compiled extension of every claimed version's set but the
// newest as a delta against the newest set's build of the same extension (the same module for
// another CPython, mostly the same machine code), when that is much smaller: grpcio's extension
// is about 7 MiB compressed per version on linux_amd64, its delta about 1.7 MiB. Each delta is checked to
// rebuild the extension before the extension is removed. The sets list their deltas in
// DeltasFile.
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
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".so") || !abiTag.MatchString(d.Name()) {
				return err
			}
			info, err := d.Info()
			if err != nil || !info.Mode().IsRegular() || info.Size() < minDeltaFile {
				return err
			}
			rel, _ := filepath.Rel(set, p)
			baseRel := filepath.Join(filepath.Dir(rel), abiTag.ReplaceAllString(d.Name(), "."+baseTag))
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
		if err := os.WriteFile(filepath.Join(set, DeltasFile), append(data, '\n'), 0o644); err != nil {
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
	if err := os.WriteFile(path+DeltaSuffix, d, 0o644); err != nil {
		return deltaEntry{}, false, err
	}
	if err := os.Remove(path); err != nil {
		return deltaEntry{}, false, err
	}
	sum := sha256.Sum256(t)
	return deltaEntry{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(t))}, true, nil
}

// deltaBootstrap is the Python the launcher runs, before the provider's code, in a set that has a
// DeltasFile (d is the set's directory): each extension listed is rebuilt once from the base set's
// and its delta into the user's cache beside the bytecode (CACHE/oprov-python/ext/SHA256/NAME,
// directories 0700), or a private temporary directory when the cache cannot be written; its
// SHA-256 is checked on every launch, and a rebuild that does not match stops the launch, with
// its message on stderr and stdout (where tofu quotes it, as the launcher's own failures). A
// finder first on sys.meta_path then loads each such module from its rebuilt file. (No single
// quote: it stands inside the shell script's single quotes.)
const deltaBootstrap = `import os
if os.path.exists(d + "/` + DeltasFile + `"):
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
        import json, hashlib
        from importlib.machinery import ExtensionFileLoader, ModuleSpec
        lib = d.rpartition("/")[0]
        tops = [os.path.join(os.path.dirname(sys.pycache_prefix), "ext")] if sys.pycache_prefix else []
        with open(d + "/` + DeltasFile + `") as f:
            entries = json.load(f)
        mods = {}
        for e in entries:
            name = e["file"].rpartition("/")[2]
            for top in tops + [None]:
                if top is None:
                    import tempfile
                    top = tempfile.mkdtemp(prefix="oprov-ext-")
                p = os.path.join(top, e["sha256"], name)
                try:
                    with open(p, "rb") as f:
                        if hashlib.file_digest(f, "sha256").hexdigest() == e["sha256"]:
                            break
                except OSError:
                    pass
                try:
                    data = _oprov_apply(lib + "/" + e["base"], d + "/" + e["file"] + "` + DeltaSuffix + `")
                except Exception as err:
                    data = str(err).encode()
                if hashlib.sha256(data).hexdigest() != e["sha256"]:
                    msg = sys.argv[0] + ": the packaged extension " + e["module"] + " does not rebuild to its SHA-256: the package is damaged; install it again"
                    print(msg, flush=True)
                    raise SystemExit(msg)
                try:
                    os.makedirs(os.path.dirname(p), mode=0o700, exist_ok=True)
                    tmp = p + ".tmp%d" % os.getpid()
                    with open(tmp, "wb") as f:
                        f.write(data)
                    os.replace(tmp, p)
                    break
                except OSError:
                    continue
            mods[e["module"]] = p
        class _OprovFinder:
            @staticmethod
            def find_spec(name, path=None, target=None):
                p = mods.get(name)
                if not p:
                    return None
                spec = ModuleSpec(name, ExtensionFileLoader(name, p), origin=p)
                spec.has_location = True
                return spec
        sys.meta_path.insert(0, _OprovFinder)
    _oprov_ext(d)
`
