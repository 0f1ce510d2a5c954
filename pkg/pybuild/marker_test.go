package pybuild

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goodMarkers are PEP 508 environment markers checkMarker must take; the last ones use PEP 751's
// variables, which older versions of packaging do not know.
var goodMarkers = []string{
	`python_version >= "3.11" and sys_platform == "linux"`,
	`extra == 'x'`,
	`python_version<"3.13"`,
	`(os_name == "nt" or sys_platform == "darwin") and python_version < '3.13'`,
	"platform_machine\t!=\t'aarch64'",
	`((implementation_name == "cpython"))`,
	`python_full_version ~= "3.11.0" or python_full_version === "3.12.1"`,
	`platform_version == "#1 SMP PREEMPT_DYNAMIC"`,
	`"linux" in sys_platform and "x" not in platform_release`,
	`platform.python_implementation == "CPython" and os.name == 'posix'`,
	`platform_system == "Linux" and platform_python_implementation != 'PyPy' and implementation_version > "3"`,
	`"dev" in dependency_groups or 'x' not in extras`,
}

func TestCheckMarkerGood(t *testing.T) {
	for _, m := range goodMarkers {
		if err := checkMarker(m); err != nil {
			t.Errorf("%q: %v", m, err)
		}
	}
}

// TestCheckMarkerAgreesWithPip: the markers checkMarker takes (but PEP 751's) are markers to the
// packaging that pip vendors, too.
func TestCheckMarkerAgreesWithPip(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	markers, _ := json.Marshal(goodMarkers[:len(goodMarkers)-1])
	code := "import json, sys\ntry:\n    from pip._vendor.packaging.markers import Marker\nexcept ImportError:\n    print(\"no pip\"); sys.exit()\n" +
		"for m in json.loads(sys.argv[1]):\n    Marker(m)\nprint(\"ok\")\n"
	out, err := exec.Command(py, "-I", "-c", code, string(markers)).CombinedOutput()
	if strings.TrimSpace(string(out)) == "no pip" {
		t.Skip("no pip in python3")
	}
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("pip's packaging refuses a marker checkMarker takes: %v\n%s", err, out)
	}
}

func TestCheckMarkerBad(t *testing.T) {
	for _, tc := range []struct{ marker, says string }{
		{"python_version >= \"3.11\"\u2028--index-url http://127.0.0.1:1/evil", `at byte 24 ("\u2028--index-url http://12...")`},
		{"python_version >= \"3.11\u2028--index-url http://127.0.0.1:1/evil\"", "U+2028"},
		{"extra == 'x'\u2029-i http://x", "want and, or or the end"},
		{"extra == 'x\v'", "U+000B"},
		{"extra == 'x\f'", "U+000C"},
		{"extra == 'x\x1c'", "U+001C"},
		{"extra == 'x\u0085'", "U+0085"},
		{"extra == 'x\n'", "U+000A"},
		{"extra == 'x\\'", "U+005C"},
		{"extra == 'é'", "U+00E9"},
		{"python_version >= \"3.11\" --index-url http://x", "want and, or or the end"},
		{"foo == '1'", "want a marker variable"},
		{"python_version >=", "at its end: want a marker variable or a quoted string"},
		{"'a' not 'b'", "want in after not"},
		{"'a' notin extras", "want a comparison"},
		{"(extra == 'x'", "at its end: want )"},
		{"extra == 'x", "does not end"},
		{"", "at its end"},
		{"and", "want a marker variable"},
		{"extra == 'x' or", "at its end"},
		{strings.Repeat("(", 40) + "extra == 'x'" + strings.Repeat(")", 40), "nested more than 32 deep"},
	} {
		err := checkMarker(tc.marker)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q: %v, want an error saying %q", tc.marker, err, tc.says)
		}
	}
}

// TestPyLockPinForPip: what pip would read other than written (a comment, an option, a
// variable), even inside a marker's quotes, is refused with the reason.
func TestPyLockPinForPip(t *testing.T) {
	if line, err := pyLockPin("grpcio", "1.67.1", `sys_platform == "linux"`); err != nil || line != `grpcio==1.67.1 ; sys_platform == "linux"` {
		t.Errorf("good pin: %q %v", line, err)
	}
	for _, tc := range []struct{ name, version, marker, says string }{
		{"x", "1", `platform_version == "a #b"`, "comment"},
		{"x", "1", `platform_version == "a --index-url=http://x"`, "option"},
		{"x", "1", `platform_version == "${HOME}"`, "environment variable"},
		{"x\u2028-i", "1", "", "not a distribution name"},
		{"x", "1\u2028-i http://x", "", "is not a version"},
		{"x", "1 ; os_name == 'nt'", "", "is not a version"},
	} {
		if _, err := pyLockPin(tc.name, tc.version, tc.marker); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%q %q %q: %v, want an error saying %q", tc.name, tc.version, tc.marker, err, tc.says)
		}
	}
}

// TestProjectPinsMarkerLineBreak: a pylock.toml whose marker holds U+2028 and an index option is
// refused naming the file and the entry, and nothing is written for pip.
func TestProjectPinsMarkerLineBreak(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	lock := "lock-version = \"1.0\"\n\n[[packages]]\nname = \"protobuf\"\nversion = \"5.28.3\"\n\n[[packages]]\nname = \"grpcio\"\nversion = \"1.67.1\"\n" +
		"marker = \"python_version >= '3.11'\u2028--index-url http://127.0.0.1:9/evil\"\n"
	if err := os.WriteFile(filepath.Join(dir, "pylock.toml"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := projectPins(dir, "p", "", scratch)
	for _, want := range []string{filepath.Join(dir, "pylock.toml") + ": packages[1] (name \"grpcio\")", "not a PEP 508 environment marker", `\u2028`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	if left, _ := os.ReadDir(scratch); len(left) != 0 {
		t.Errorf("written for pip anyway: %v", left)
	}
}

// TestWritePipFile: every line written for pip is one line to pip, or nothing is written.
func TestWritePipFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.txt")
	if err := writePipFile(p, []string{"a==1", "--find-links /x y"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "a==1\n--find-links /x y\n" {
		t.Errorf("wrote %q", got)
	}
	for _, bad := range []string{"a==1\u2028-i http://x", "a==1\x1d", "a==1\x00", "a==1\xff"} {
		if err := writePipFile(p, []string{"b==2", bad}); err == nil {
			t.Errorf("%q written", bad)
		}
	}
	if got, _ := os.ReadFile(p); string(got) != "a==1\n--find-links /x y\n" {
		t.Errorf("a refused write changed the file: %q", got)
	}
}

// FuzzCheckMarker: the parser never panics, and a marker it takes is ASCII, one line to pip,
// and, once past pyLockPin, one pin line as pip reads a constraints file.
func FuzzCheckMarker(f *testing.F) {
	for _, m := range goodMarkers {
		f.Add(m)
	}
	f.Add("python_version >= \"3.11\"\u2028--index-url http://127.0.0.1:1/evil")
	f.Add("extra == 'x\\' or (")
	f.Fuzz(func(t *testing.T, m string) {
		if checkMarker(m) != nil {
			return
		}
		for i := 0; i < len(m); i++ {
			if m[i] >= 0x80 || m[i] < 0x20 && m[i] != '\t' || m[i] == 0x7f || m[i] == '\\' {
				t.Fatalf("%q taken, with byte %#x", m, m[i])
			}
		}
		if err := checkPipLine(m); err != nil {
			t.Fatalf("%q taken: %v", m, err)
		}
		line, err := pyLockPin("x", "1", m)
		if err != nil {
			return
		}
		if got := pipLines(line); len(got) != 1 || got[0] != strings.TrimSpace(line) {
			t.Fatalf("%q: pip reads %q from the line %q", m, got, line)
		}
	})
}
