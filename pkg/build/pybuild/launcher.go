package pybuild

import (
	"fmt"
	"strings"
)

// PythonEntryCode is the Python that runs a console script's entry point the way pip's wrapper
// does, with sys.argv[0] set to the script's name. When withPath is true, the first argument is
// a directory put first on sys.path (the dependencies packaged for this interpreter).
func PythonEntryCode(script, entry string, withPath bool) string {
	mod, attr, _ := strings.Cut(entry, ":")
	first, _, _ := strings.Cut(attr, ".")
	var b strings.Builder
	b.WriteString("import sys\n")
	if withPath {
		b.WriteString("sys.path.insert(0, sys.argv.pop(1))\n")
	}
	fmt.Fprintf(&b, "sys.argv[0] = %q\nfrom %s import %s\nsys.exit(%s())\n", script, mod, first, attr)
	return b.String()
}

// PythonLauncher is the executable of a Python release package: a POSIX shell script that finds
// a python3 whose CPython minor version the package carries dependencies for (lib/cpXY beside
// it), and runs the console script's entry point with them. With none, it prints one line (on
// stderr, and on stdout where tofu quotes it) and exits 1, before any plugin handshake. Python runs isolated (-I: no user site, no
// PYTHON* variables) and writes no bytecode (-B): an installed package must stay byte for byte
// what the lock file's h1: hash says.
func PythonLauncher(script, entry string, versions []string) string {
	var names []string
	for i := len(versions) - 1; i >= 0; i-- {
		names = append(names, "python"+versions[i])
	}
	want := strings.Join(versions, ", ")
	return fmt.Sprintf(`#!/bin/sh
# %[1]s, packaged by oprov: runs the provider with this machine's CPython (%[2]s),
# using the dependencies packaged for that version in lib/cpXY beside this file.
case "$0" in */*) here="${0%%/*}" ;; *) here=$(dirname "$(command -v "$0")") ;; esac
found=""
for py in ${OPROV_PROVIDER_PYTHON:-} python3 %[3]s; do
  command -v "$py" >/dev/null 2>&1 || continue
  v=$("$py" -c 'import sys; print("%%d.%%d cp%%d%%d" %% (sys.version_info[:2] * 2))' 2>/dev/null) || continue
  if [ -d "$here/lib/${v#* }" ]; then
    exec "$py" -I -B -u -c '%[4]s' "$here/lib/${v#* }" "$@"
  fi
  found="$found, $py is ${v%% *}"
done
found=${found#, }
msg="%[1]s: no compatible Python: it needs CPython %[2]s as python3 on PATH (${found:-no python3 on PATH})"
# On stderr for people; on stdout too, where the handshake line belongs, because tofu and
# terraform quote that line in their error ("Unrecognized remote plugin message: ...") but keep
# a plugin's stderr for their debug log.
echo "$msg" >&2
echo "$msg"
exit 1
`, script, want, strings.Join(names, " "), PythonEntryCode(script, entry, true))
}
