package pybuild

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// What every version's set holds identically moves to lib/common once; an entry that differs
// in one set (or is missing from one) stays in every set that has it.
func TestShareCommon(t *testing.T) {
	lib := t.TempDir()
	write := func(rel, data string) {
		p := filepath.Join(lib, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"cp311", "cp312", "cp313"} {
		write(v+"/pure/__init__.py", "x = 1\n")
		write(v+"/pure/sub/m.py", "y = 2\n")
		write(v+"/pure-1.0.dist-info/RECORD", "pure/__init__.py\n")
		write(v+"/mod.py", "z = 3\n")
		write(v+"/grpc/__init__.py", "g = 1\n")
		write(v+"/grpc/_cython/cygrpc."+v+".so", "binary "+v)
		write(v+"/differs.py", "v = '"+map[string]string{"cp311": "a", "cp312": "a", "cp313": "b"}[v]+"'\n")
	}
	write("cp311/only311.py", "")
	if err := shareCommon(lib, []string{"3.11", "3.12", "3.13"}); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, d := range []string{"common", "cp311", "cp312", "cp313"} {
		es, _ := os.ReadDir(filepath.Join(lib, d))
		for _, e := range es {
			got[d] = append(got[d], e.Name())
		}
		sort.Strings(got[d])
	}
	want := map[string][]string{
		"common": {"mod.py", "pure", "pure-1.0.dist-info"},
		"cp311":  {"differs.py", "grpc", "only311.py"},
		"cp312":  {"differs.py", "grpc"},
		"cp313":  {"differs.py", "grpc"},
	}
	for d, w := range want {
		if len(got[d]) != len(w) {
			t.Errorf("%s holds %v, want %v", d, got[d], w)
			continue
		}
		for i := range w {
			if got[d][i] != w[i] {
				t.Errorf("%s holds %v, want %v", d, got[d], w)
				break
			}
		}
	}
	if data, err := os.ReadFile(filepath.Join(lib, "common", "pure", "sub", "m.py")); err != nil || string(data) != "y = 2\n" {
		t.Errorf("common/pure/sub/m.py: %q %v", data, err)
	}
}

func TestCheckVersions(t *testing.T) {
	if got, err := checkVersions([]string{"3.13", "3.12", "3.13"}); err != nil || len(got) != 2 || got[0] != "3.12" || got[1] != "3.13" {
		t.Errorf("3.13,3.12,3.13: %v %v, want [3.12 3.13]", got, err)
	}
	if got, _ := checkVersions(nil); len(got) != len(PythonVersions) {
		t.Errorf("none: %v, want the default", got)
	}
	for _, bad := range []string{"3.10", "3", "3.12.1", "cp312", "2.7"} {
		if _, err := checkVersions([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPinLine(t *testing.T) {
	for line, want := range map[string]string{
		"grpcio==1.67.1":                                    "grpcio 1.67.1",
		"  protobuf == 5.29.6  # pinned":                    "protobuf 5.29.6",
		"cryptography[ssh]==44.0.0; python_version>='3.11'": "cryptography 44.0.0",
		"grpcio>=1.60":                                      "",
		"# grpcio==1.0":                                     "",
	} {
		got := ""
		if m := pinLine().FindStringSubmatch(line); m != nil {
			got = m[1] + " " + m[2]
		}
		if got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
}

// TestAllowsMinor: requires-python decides which CPython minors are claimed by default.
func TestAllowsMinor(t *testing.T) {
	for spec, want := range map[string]string{
		"":                  "3.11 3.12 3.13 3.14",
		">=3.11":            "3.11 3.12 3.13 3.14",
		">=3.11,<4.0":       "3.11 3.12 3.13 3.14",
		">=3.12, <3.14":     "3.12 3.13",
		">3.11":             "3.12 3.13 3.14",
		">=3.12.4":          "3.12 3.13 3.14",
		"~=3.11":            "3.11 3.12 3.13 3.14",
		"~=3.12.1":          "3.12",
		"==3.13.*":          "3.13",
		"!=3.12.*,>=3.11":   "3.11 3.13 3.14",
		"<=3.12":            "3.11 3.12",
		">=3.10,!=3.13.2.*": "3.11 3.12 3.13 3.14",
	} {
		var got []string
		for _, minor := range []int{11, 12, 13, 14} {
			ok, err := allowsMinor(spec, minor)
			if err != nil {
				t.Fatalf("%q: %v", spec, err)
			}
			if ok {
				got = append(got, fmt.Sprintf("3.%d", minor))
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("requires-python %q admits %v, want %s", spec, got, want)
		}
	}
	if _, err := allowsMinor(">=3.11,fish", 12); err == nil {
		t.Error("an unreadable clause was accepted")
	}
}

// TestAdmittedVersions: the default claim is what requires-python admits of PythonVersions, and
// a project admitting none of them says so.
func TestAdmittedVersions(t *testing.T) {
	got, err := admittedVersions(&PyProject{RequiresPython: ">=3.12,<3.14"}, PythonVersions)
	if err != nil || strings.Join(got, ",") != "3.12,3.13" {
		t.Errorf("got %v %v, want 3.12,3.13", got, err)
	}
	if _, err := admittedVersions(&PyProject{RequiresPython: "<3.11"}, PythonVersions); err == nil || !strings.Contains(err.Error(), "admits none") {
		t.Errorf("<3.11: %v", err)
	}
	p, err := parsePyProject("d", []byte("[project]\nname = \"x\"\nrequires-python = \">=3.13\"\n"))
	if err != nil || p.RequiresPython != ">=3.13" {
		t.Errorf("requires-python read as %q (%v)", p.RequiresPython, err)
	}
}

// TestNoWheels: only a failure for want of a fitting distribution drops a default version.
func TestNoWheels(t *testing.T) {
	if !noWheels(errors.New("pip install failed:\nERROR: No matching distribution found for grpcio")) {
		t.Error("pip's no-distribution failure not recognised")
	}
	if noWheels(errors.New("pip install failed: OSError: [Errno 28] No space left on device")) {
		t.Error("a disk failure taken for missing wheels")
	}
}
