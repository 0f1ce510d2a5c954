package pybuild

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestRequirementsPins: a pip-compile style file with hashes becomes plain pins pip takes as
// constraints, read by pip's own line rules; included files are read in place; what pip takes no
// constraint of is dropped; a relative --find-links is made absolute.
func TestRequirementsPins(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("base.txt", "msgpack==1.2.4 # shared\n")
	write("more.txt", "cffi==2.1.1\n")
	main := write("requirements.txt", "# generated\n--require-hashes\ngrpcio==1.67.1 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n\n"+
		"protobuf==5.28.3 --hash sha256:cc ; python_version >= \"3.11\"\n"+
		"-r base.txt # the shared pins\n-cmore.txt\n"+
		"# see C:\\\ntf==1.2.0\n"+
		"typing-extensions==4.16.0 # x \\\nwheel==0.48.0\n"+
		"-e .\n./local-lib\nthing @ https://example.com/thing.whl\n--find-links ./wheels\n--index-url=https://pypi.example/simple\n--unknown-option\n")
	got, err := requirementsPins(main, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"grpcio==1.67.1", "protobuf==5.28.3 ; python_version >= \"3.11\"", "msgpack==1.2.4", "cffi==2.1.1",
		"tf==1.2.0", "typing-extensions==4.16.0", "wheel==0.48.0", "--find-links " + filepath.Join(dir, "wheels"), "--index-url https://pypi.example/simple"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	for _, line := range got[:2] {
		if pinLine().FindStringSubmatch(line) == nil {
			t.Errorf("%q is not read back as a pin", line)
		}
	}

	loop := write("loop.txt", "-r loop.txt\n")
	if _, err := requirementsPins(loop, nil); err == nil || !strings.Contains(err.Error(), "includes itself") {
		t.Errorf("a file including itself: %v", err)
	}
	remote := write("remote.txt", "-r https://example.com/reqs.txt\n")
	if _, err := requirementsPins(remote, nil); err == nil || !strings.Contains(err.Error(), "local files only") {
		t.Errorf("a remote include: %v", err)
	}
}

// TestPyLockHostile: a lock entry whose name, version or marker would break out of its one line
// of the constraints file (a newline and a pip option) is refused, naming the entry.
func TestPyLockHostile(t *testing.T) {
	dir := t.TempDir()
	for _, entry := range []string{
		"name = \"grpcio\\n--extra-index-url https://evil.example/simple\"\nversion = \"1.0\"",
		"name = \"grpcio\"\nversion = \"1.0 --index-url=https://evil.example\"",
		"name = \"grpcio\"\nversion = \"1.0\"\nmarker = \"python_version > '3'\\n-r /etc/passwd\"",
	} {
		p := filepath.Join(dir, "pylock.toml")
		os.WriteFile(p, []byte("lock-version = \"1.0\"\n[[packages]]\n"+entry+"\n"), 0o644)
		if pins, err := pyLockPins(p, "x"); err == nil || !strings.Contains(err.Error(), "packages[0]") {
			t.Errorf("%q: pins %q, err %v; want a refusal naming packages[0]", entry, pins, err)
		}
	}
}

// TestFindPinsOrder: pylock.toml, then the one pylock.NAME.toml (several ask for --python-pins),
// then constraints.txt, then requirements.txt; a chosen file wins and a missing one is named.
func TestFindPinsOrder(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := func() string {
		t.Helper()
		p, err := projectPins(dir, "x", "", scratch)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Base(p)
	}
	if p, err := projectPins(dir, "x", "", scratch); p != "" || err != nil {
		t.Fatalf("no pins: %q %v", p, err)
	}
	write("requirements.txt", "grpcio==1.67.1\n")
	if g := got(); g != "requirements.txt" {
		t.Errorf("got %s, want requirements.txt", g)
	}
	write("constraints.txt", "grpcio==1.67.1\n")
	if g := got(); g != "constraints.txt" {
		t.Errorf("got %s, want constraints.txt", g)
	}
	lock := "lock-version = \"1.0\"\n\n[[packages]]\nname = \"grpcio\"\nversion = \"1.67.1\"\n"
	write("pylock.dev.toml", lock)
	if g := got(); g != "pylock.dev.toml" {
		t.Errorf("got %s, want pylock.dev.toml", g)
	}
	write("pylock.prod.toml", lock)
	if _, err := projectPins(dir, "x", "", scratch); err == nil || !strings.Contains(err.Error(), "pylock.dev.toml, pylock.prod.toml") || !strings.Contains(err.Error(), "--python-pins") {
		t.Errorf("two named lock files: %v", err)
	}
	if p, err := projectPins(dir, "x", filepath.Join(dir, "pylock.prod.toml"), scratch); err != nil || filepath.Base(p) != "pylock.prod.toml" {
		t.Errorf("chosen pylock.prod.toml: %q %v", p, err)
	} else if data, _ := os.ReadFile(p); string(data) != "grpcio==1.67.1\n" {
		t.Errorf("chosen lock gave constraints %q", data)
	}
	write("pylock.toml", lock)
	if g := got(); g != "pylock.toml" {
		t.Errorf("got %s, want pylock.toml", g)
	}
	if _, err := projectPins(dir, "x", filepath.Join(dir, "nope.txt"), scratch); err == nil || !strings.Contains(err.Error(), "--python-pins") || !strings.Contains(err.Error(), "nope.txt") {
		t.Errorf("missing chosen file: %v", err)
	}
}

func TestDistFile(t *testing.T) {
	for file, want := range map[string]pin{
		"grpcio-1.85.1-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl": {"grpcio", "1.85.1"},
		"typing_extensions-4.16.0-py3-none-any.whl":                                {"typing_extensions", "4.16.0"},
		"docopt-0.6.2.tar.gz":          {"docopt", "0.6.2"},
		"python-dateutil-2.8.2.tar.gz": {"python-dateutil", "2.8.2"},
		"pkg-1.0-1-py3-none-any.whl":   {"pkg", "1.0"},
		"zipped-2.0.zip":               {"zipped", "2.0"},
	} {
		got, _, ok := distFile(file)
		if !ok || got != want {
			t.Errorf("%s: %v %v, want %v", file, got, ok, want)
		}
	}
	for _, file := range []string{"notes.txt", "bad.whl", "x-.tar.gz", "-1.0.tar.gz"} {
		if _, _, ok := distFile(file); ok {
			t.Errorf("%s read as a distribution", file)
		}
	}
}

func TestUnmetName(t *testing.T) {
	for msg, want := range map[string]string{
		"pip install failed:\nERROR: Could not find a version that satisfies the requirement cryptography>43 (from tf) (from versions: none)\nERROR: No matching distribution found for cryptography>43": "cryptography",
		"ERROR: No matching distribution found for grpcio==1.85.1": "grpcio",
		"ERROR: ResolutionImpossible: for help visit ...":          "",
	} {
		if got := unmetName(errors.New(msg)); got != want {
			t.Errorf("%q: %q, want %q", msg, got, want)
		}
	}
}

func TestUnmetConstraint(t *testing.T) {
	msg := "ERROR: Cannot install skewdep because these package versions have conflicting dependencies.\n\nThe conflict is caused by:\n    The user requested skewdep\n    The user requested (constraint) skewdep==2.0\n"
	if got := unmetName(errors.New(msg)); got != "skewdep" {
		t.Errorf("got %q, want skewdep", got)
	}
}

// FuzzRequirementsPins: whatever a requirements file holds, each constraint line given is one
// line, and is a requirement or one of the options kept: nothing else reaches pip.
func FuzzRequirementsPins(f *testing.F) {
	f.Add("grpcio==1.67.1 \\\n  --hash=sha256:aa\n-r base.txt\n# c\n--find-links ./w\n")
	f.Add("a==1 # x \\\nb==2\n-e .\n--require-hashes\n")
	f.Fuzz(func(t *testing.T, text string) {
		dir := t.TempDir()
		path := filepath.Join(dir, "requirements.txt")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		lines, err := requirementsPins(path, nil)
		if err != nil {
			return
		}
		for _, line := range lines {
			opt, _ := splitOption(line)
			if strings.ContainsAny(line, "\r\n") || (opt == "" && !requirementName().MatchString(line)) || (opt != "" && !slices.Contains(keptOptions, opt)) {
				t.Fatalf("%q gave the constraint line %q", text, line)
			}
		}
	})
}
