package pybuild

import (
	"fmt"
	"strings"
)

// PythonEntryCode is the Python that runs a console script's entry point the way pip's wrapper
// does, with sys.argv[0] set to the script's name. When withPath is true (a packaged provider's
// launcher), the first argument is the user's cache directory, where bytecode and rebuilt
// extensions go when it passes the checks of placeBootstrap, which runs first; the second is a
// directory put first on sys.path (lib/cpXY, the dependencies packaged for this interpreter),
// followed by lib/common beside it (those the same for every claimed version); the extensions
// that set stores as deltas are rebuilt and found first (deltaBootstrap).
func PythonEntryCode(script, entry string, withPath bool) string {
	mod, attr, _ := strings.Cut(entry, ":")
	first, _, _ := strings.Cut(attr, ".")
	var b strings.Builder
	fmt.Fprintf(&b, "import sys\nsys.argv[0] = %q\n", script)
	if withPath {
		b.WriteString(placeBootstrap)
		fmt.Fprintf(&b, "d = sys.argv.pop(1)\nsys.path[0:0] = [d, d.rpartition(\"/\")[0] + \"/%s\"]\n", commonDir)
		b.WriteString(deltaBootstrap)
	}
	fmt.Fprintf(&b, "from %s import %s\nsys.exit(%s())\n", mod, first, attr)
	return b.String()
}

// Launcher is the executable of a Python release package: a POSIX shell script that finds
// a CPython (with the GIL: the packaged wheels are not built for the free-threaded ABI, abiflags
// "t", nor for PyPy) whose minor version the package carries dependencies for (lib/cpXY beside the script,
// symlinks followed), and runs the console script's entry point with them. OPROV_PROVIDER_PYTHON
// names the one interpreter to use; one it cannot use is named in the failure. With no usable
// interpreter it prints one line (on stderr, and on stdout where tofu quotes it) and exits 1,
// before any plugin handshake.
//
// Python runs isolated (-I: no user site, no PYTHON* variables; the probe too, and without
// site, -S, to cost as little as an interpreter start can) and unbuffered
// (-u: -I ignores PYTHONUNBUFFERED and the tf SDK does not flush its --dev line). Bytecode goes
// to the user's cache, never beside the sources: an installed package must stay byte for byte
// what the lock file's h1: hash says. CPython starts writing none (-B) and with no
// pycache_prefix; the code then checks, in-process, that the cache (or $TMPDIR/oprov-python-UID)
// is a directory of this user alone before it sets sys.pycache_prefix there (placeBootstrap), so
// no bytecode is read from a place another user can write. Where HOME has no writable ~/.cache (a
// read-only home), HOME is pointed at a private writable directory, since the tf SDK keeps its
// certificate under ~/.cache.
func Launcher(script, entry string, versions []string) string {
	var names []string
	for i := len(versions) - 1; i >= 0; i-- {
		names = append(names, "python"+versions[i])
	}
	want := strings.Join(versions, ", ")
	return fmt.Sprintf(`#!/bin/sh
# %[1]s, packaged by oprov: runs the provider with this machine's CPython (%[2]s),
# using the dependencies packaged for that version in lib/cpXY beside this file, then lib/common.
self=$0
case "$self" in */*) ;; *) self=$(command -v "$self") ;; esac
while [ -L "$self" ]; do
  link=$(readlink "$self") || break
  case "$link" in /*) self=$link ;; *) self="${self%%/*}/$link" ;; esac
done
here="${self%%/*}"
fail() {
  msg="%[1]s: no compatible Python: $1"
  # On stderr for people; on stdout too, where the handshake line belongs, because tofu and
  # terraform quote that line in their error ("Unrecognized remote plugin message: ...") but
  # keep a plugin's stderr for their debug log.
  echo "$msg" >&2
  echo "$msg"
  exit 1
}
if [ -n "${OPROV_PROVIDER_PYTHON:-}" ]; then
  command -v "$OPROV_PROVIDER_PYTHON" >/dev/null 2>&1 || fail "OPROV_PROVIDER_PYTHON=$OPROV_PROVIDER_PYTHON is not an executable it can find"
  candidates=$OPROV_PROVIDER_PYTHON
else
  candidates="python3 %[3]s"
fi
found=""
for py in $candidates; do
  command -v "$py" >/dev/null 2>&1 || continue
  v=$("$py" -I -S -c 'import sys; print("%%d.%%d cp%%d%%d" %% (sys.version_info[:2] * 2), sys.implementation.name, getattr(sys, "abiflags", "") or "-")' 2>/dev/null) || v=""
  case "$v" in
  "") why="$py did not run" ;;
  *" cpython "*t*) why="$py is free-threaded CPython ${v%%%% *} (the packaged wheels need the GIL build)" ;;
  *" cpython "*)
    tag=${v#* }; tag=${tag%%%% *}
    if [ -d "$here/lib/$tag" ]; then
      sdk="${HOME:-/nonexistent}/.cache/tf-python-provider"
      if ! { [ -d "$sdk" ] && [ -w "$sdk" ]; } && ! { mkdir -p "$sdk" 2>/dev/null && [ -w "$sdk" ]; }; then
        home="${TMPDIR:-/tmp}/oprov-python-home-$(id -u)"
        mkdir -m 700 "$home" 2>/dev/null
        if [ -L "$home" ] || [ ! -O "$home" ] || [ ! -w "$home" ]; then home=$(mktemp -d) || fail "HOME (${HOME:-unset}) is not writable, nor is a temporary directory"; fi
        echo "%[1]s: HOME (${HOME:-unset}) has no writable .cache: running with HOME=$home" >&2
        HOME=$home; export HOME
      fi
      cache="${XDG_CACHE_HOME:-$HOME/.cache}"
      exec "$py" -I -u -B -c '%[4]s' "$cache" "$here/lib/$tag" "$@"
    fi
    why="$py is ${v%%%% *}" ;;
  *) impl=${v#* * }; why="$py is ${impl%%%% *} ${v%%%% *}, not CPython" ;;
  esac
  [ -n "${OPROV_PROVIDER_PYTHON:-}" ] && fail "it needs CPython %[2]s (OPROV_PROVIDER_PYTHON=$why)"
  found="$found, $why"
done
found=${found#, }
fail "it needs CPython %[2]s as python3 on PATH (${found:-no python3 on PATH})"
`, script, want, strings.Join(names, " "), PythonEntryCode(script, entry, true))
}

// IsLauncher reports whether data is, byte for byte, a launcher Launcher writes for the
// console script named script (for some entry point and CPython versions): a program whose
// behaviour oprov knows, since it wrote it. Only then does a sandbox let it run what the
// launcher runs (sh and its tools, CPython).
func IsLauncher(data []byte, script string) bool {
	text := string(data)
	rest, ok := strings.CutPrefix(text, "#!/bin/sh\n# "+script+", packaged by oprov: runs the provider with this machine's CPython (")
	if !ok {
		return false
	}
	want, _, ok := strings.Cut(rest, "),\n")
	if !ok {
		return false
	}
	// The entry point is the last line but one of the Python code: from MOD import FIRST, then
	// sys.exit(ATTR()).
	i := strings.LastIndex(text, "\nsys.exit(")
	if i < 0 {
		return false
	}
	attr, _, ok := strings.Cut(text[i+len("\nsys.exit("):], "())\n")
	j := strings.LastIndex(text[:i], "\nfrom ")
	if !ok || j < 0 {
		return false
	}
	mod, _, ok := strings.Cut(text[j+len("\nfrom "):i], " import ")
	if !ok {
		return false
	}
	return text == Launcher(script, mod+":"+attr, strings.Split(want, ", "))
}

// LauncherHome is what a sandboxed provider's launcher runs with so that every place it writes
// outside its package is in dir, a directory of that one package: the variables HOME=dir (the tf
// SDK keeps its certificate in dir/.cache/tf-python-provider) and XDG_CACHE_HOME=dir/.cache
// (bytecode and rebuilt extensions in dir/.cache/oprov-python), and the directories to make
// (mode 0700) before it starts. No two packages share one, so no provider writes bytecode
// another runs.
func LauncherHome(dir string) (env, dirs []string) {
	cache := dir + "/.cache"
	return []string{"HOME=" + dir, "XDG_CACHE_HOME=" + cache},
		[]string{dir, cache, cache + "/oprov-python", cache + "/tf-python-provider"}
}
