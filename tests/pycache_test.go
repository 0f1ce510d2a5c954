package tests

import (
	"encoding/binary"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// otherUID is the user the pycache test plants bytecode as (nobody).
const otherUID = 65534

// asOtherUser runs sh -c script (with args) as otherUID and gives its combined output.
func asOtherUser(script string, args ...string) (string, error) {
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// openTempDir is a new directory in the system's temporary directory that every user can reach
// (t.TempDir's parents are closed to others); mode is its mode.
func openTempDir(t *testing.T, pattern string, mode fs.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// planter makes unchecked-hash .pyc files (PEP 552: flags 0b01, so CPython runs them without
// looking at the source) for the interpreter py, whose code creates a marker file named after
// the module and then runs the module's real source, so that a provider reading them still works.
type planter struct {
	t              *testing.T
	py             string
	stage, markers string // stage holds the compiled files, readable by the other user
	tag            string // the interpreter's cache tag, cpython-3XY
}

func newPlanter(t *testing.T, py string) *planter {
	out, err := exec.Command(py, "-I", "-c", "import sys; print(sys.implementation.cache_tag)").Output()
	if err != nil {
		t.Fatalf("%s: %v", py, err)
	}
	return &planter{t: t, py: py, stage: openTempDir(t, "oprov-plant-", 0o755), markers: t.TempDir(), tag: strings.TrimSpace(string(out))}
}

// compile gives the staged .pyc that stands for source (a module's real .py file).
func (p *planter) compile(source string) string {
	t := p.t
	name := strings.ReplaceAll(strings.TrimPrefix(source, "/"), "/", "_")
	evil := filepath.Join(p.stage, name+".py")
	code := "open(" + strconv.Quote(filepath.Join(p.markers, name)) + ", \"w\").close()\n" +
		"exec(compile(open(" + strconv.Quote(source) + ", \"rb\").read(), " + strconv.Quote(source) + ", \"exec\"))\n"
	writeFile(t, evil, code)
	pyc := evil + "c"
	script := "import py_compile, sys\npy_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n"
	if out, err := exec.Command(p.py, "-I", "-c", script, evil, pyc).CombinedOutput(); err != nil {
		t.Fatalf("compiling %s: %v\n%s", evil, err, out)
	}
	data, err := os.ReadFile(pyc)
	if err != nil || len(data) < 16 || binary.LittleEndian.Uint32(data[4:8]) != 0b01 {
		t.Fatalf("%s is not an unchecked-hash .pyc (%v)", pyc, err)
	}
	os.Chmod(pyc, 0o644)
	return pyc
}

// target is where CPython with pycache_prefix prefix looks for source's bytecode.
func (p *planter) target(prefix, source string) string {
	dir, file := filepath.Split(source)
	return filepath.Join(prefix, dir, strings.TrimSuffix(file, ".py")+"."+p.tag+".pyc")
}

// plant puts, as the other user, the .pyc for each source where prefix would hold it. It gives
// how many could be written (the other user may be refused).
func (p *planter) plant(prefix string, sources []string) int {
	n := 0
	for _, src := range sources {
		dst := p.target(prefix, src)
		out, err := asOtherUser(`mkdir -p "$(dirname "$2")" && cp "$1" "$2.tmp" && mv -f "$2.tmp" "$2"`, p.compile(src), dst)
		if err != nil {
			p.t.Logf("the other user could not plant %s: %v %s", dst, err, strings.TrimSpace(out))
			continue
		}
		n++
	}
	return n
}

// ran lists the markers the planted code left.
func (p *planter) ran() []string {
	entries, _ := os.ReadDir(p.markers)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// pyhelloSources are the modules of the installed pyhello, by the path tofu launches it from
// (the configuration's .terraform/providers, links followed as far as the launcher follows
// them: not the directories'), and the standard library's json, which the provider imports after
// the launcher started: their real .py files.
func pyhelloSources(t *testing.T, py, dir string) []string {
	out, _ := filepath.Glob(filepath.Join(dir, ".terraform", "providers", "*", "*", "*", "*", "*", "lib", "*", "pyhello", "*.py"))
	if len(out) == 0 {
		t.Fatalf("no installed pyhello module under %s/.terraform/providers", dir)
	}
	std, err := exec.Command(py, "-I", "-c", "import json; print(json.__file__)").Output()
	if err != nil {
		t.Fatal(err)
	}
	return append(out, strings.TrimSpace(string(std)))
}

// TestPythonPycachePoisoning: with XDG_CACHE_HOME a sticky directory every user can write,
// another user plants unchecked-hash bytecode for modules the packaged pyhello imports, before
// its first launch (where the launcher used to read bytecode from) and after it (where the first
// launch put its bytecode); tofu applies with the provider each time and the planted code never
// runs. A control run shows the planted files are ones CPython runs when it reads them.
func TestPythonPycachePoisoning(t *testing.T) {
	if os.Geteuid() != 0 {
		peers.Missing(t, "root, to run a child as another user")
	}
	tofu := peers.Require(t, "tofu")
	f := pyFixture(t)
	py := pythonFor(t, "3.11")
	p := newPlanter(t, py)

	for _, tc := range []struct {
		name   string
		before bool // planted before the first launch, else after it
	}{{"planted before the first launch", true}, {"planted after the first launch", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p.t, p.markers = t, t.TempDir()
			xdg := openTempDir(t, "oprov-xdg-", 0o777|fs.ModeSticky)
			// A short TMPDIR: the tf SDK makes its socket there, and a socket's path is short.
			tmp := openTempDir(t, "oprov-tmp-", 0o700)
			env := append(append([]string{}, f.env...), "XDG_CACHE_HOME="+xdg, "TMPDIR="+tmp, "OPROV_PROVIDER_PYTHON="+py)
			dir := f.freshCopy(t)
			mustOprov(t, append(env, "OPROV_TOFU="+tofu), "init", "-C", dir)
			sources := pyhelloSources(t, py, dir)
			shared := filepath.Join(xdg, "oprov-python", "pycache")
			if tc.before {
				if n := p.plant(shared, sources); n != len(sources) {
					t.Fatalf("the other user planted %d of %d files in %s, want all (the place is open to them)", n, len(sources), shared)
				}
				control(t, p, py, shared, sources)
			}
			mustTofu(t, tofu, dir, env, "apply", "-auto-approve", "-input=false")
			expectPyOutputs(t, tofu, dir, env, "Hello")
			if !tc.before {
				used := ""
				for _, prefix := range []string{shared, filepath.Join(tmp, "oprov-python-0", "pycache")} {
					for _, src := range sources {
						if _, err := os.Stat(p.target(prefix, src)); err == nil {
							used = prefix
						}
					}
				}
				if used == "" {
					t.Fatalf("the first launch left no bytecode of %v in %s or under TMPDIR", sources, shared)
				}
				t.Logf("the first launch kept bytecode in %s; the other user plants there", used)
				p.plant(used, sources)
				mustTofu(t, tofu, dir, env, "apply", "-auto-approve", "-input=false", "-replace=pyhello_greeting.world")
				expectPyOutputs(t, tofu, dir, env, "Hello")
			}
			if ran := p.ran(); len(ran) != 0 {
				t.Errorf("the other user's bytecode ran as this user: markers %v", ran)
			}
		})
	}
}

// control imports the planted modules with CPython reading bytecode from prefix (and writing
// none), then removes the markers: every planted file must have run, or the test proves nothing.
func control(t *testing.T, p *planter, py, prefix string, sources []string) {
	t.Helper()
	code := "import sys, importlib.util\nfor src in sys.argv[1:]:\n" +
		"    spec = importlib.util.spec_from_file_location(\"planted\", src)\n" +
		"    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
	for _, src := range sources {
		out, err := exec.Command(py, "-I", "-B", "-X", "pycache_prefix="+prefix, "-c", code, src).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "ImportError") {
			t.Logf("control import of %s: %v\n%s", src, err, out)
		}
	}
	if got := len(p.ran()); got != len(sources) {
		t.Fatalf("control: %d of %d planted files ran when CPython read %s: the plant is not one CPython uses", got, len(sources), prefix)
	}
	for _, name := range p.ran() {
		if err := os.Remove(filepath.Join(p.markers, name)); err != nil {
			t.Fatal(err)
		}
	}
}
