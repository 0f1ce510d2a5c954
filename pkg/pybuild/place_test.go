package pybuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runPlace runs the launcher's place choice (placeBootstrap) with this machine's python3, the
// cache directory cache and TMPDIR tmp, and gives the pycache prefix it chose ("" when it runs
// without bytecode, which it must then say on stderr).
func runPlace(t *testing.T, cache, tmp string) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH")
	}
	code := "import sys\nsys.argv[0] = \"x\"\n" + placeBootstrap + "print(sys.pycache_prefix, sys.dont_write_bytecode)\n"
	cmd := exec.Command(py, "-I", "-S", "-B", "-c", code, cache)
	cmd.Env = []string{"TMPDIR=" + tmp}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	prefix, writes, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if prefix == "/dev/null/oprov-no-bytecode" {
		if writes != "True" || !strings.Contains(stderr.String(), "x: no directory of this user alone for bytecode") {
			t.Errorf("without a place: dont_write_bytecode %s, stderr %q", writes, stderr.String())
		}
		return ""
	}
	if writes != "False" || stderr.String() != "" {
		t.Errorf("prefix %s: dont_write_bytecode %s, stderr %q", prefix, writes, stderr.String())
	}
	return prefix
}

// asOther makes path owned by another user (uid 65534); the test needs root for it.
func asOther(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a file another user's needs root")
	}
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// TestPlaceBootstrap: bytecode goes to CACHE/oprov-python only when that is a directory of this
// user alone reached through directories no one else can change; otherwise to
// $TMPDIR/oprov-python-UID under the same rule; otherwise nowhere.
func TestPlaceBootstrap(t *testing.T) {
	uid := strconv.Itoa(os.Geteuid())
	mode := func(p string, m os.FileMode) string {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		// setup gives the cache and TMPDIR to use, made in base.
		setup func(t *testing.T, base string) (cache, tmp string)
		want  string // "cache", "tmp" or "" (no bytecode)
	}{
		{"private cache", func(t *testing.T, b string) (string, string) { return b, b }, "cache"},
		{"cache made where missing", func(t *testing.T, b string) (string, string) { return b + "/a/b", b }, "cache"},
		{"cache writable by others", func(t *testing.T, b string) (string, string) {
			return mode(mkdir(t, b, "c"), 0o777), mkdir(t, b, "t")
		}, "tmp"},
		{"cache writable by its group", func(t *testing.T, b string) (string, string) {
			return mode(mkdir(t, b, "c"), 0o770), mkdir(t, b, "t")
		}, "tmp"},
		{"cache sticky and writable by all", func(t *testing.T, b string) (string, string) {
			return mode(mkdir(t, b, "c"), 0o777|os.ModeSticky), mkdir(t, b, "t")
		}, "cache"},
		{"oprov-python another user's in a sticky cache", func(t *testing.T, b string) (string, string) {
			c := mode(mkdir(t, b, "c"), 0o777|os.ModeSticky)
			asOther(t, mkdir(t, c, "oprov-python"))
			return c, mkdir(t, b, "t")
		}, "tmp"},
		{"oprov-python writable by others", func(t *testing.T, b string) (string, string) {
			mode(mkdir(t, mkdir(t, b, "c"), "oprov-python"), 0o757)
			return b + "/c", mkdir(t, b, "t")
		}, "tmp"},
		{"cache another user's", func(t *testing.T, b string) (string, string) {
			c := mkdir(t, b, "home")
			asOther(t, c)
			return c, mkdir(t, b, "t")
		}, "tmp"},
		{"pycache a link", func(t *testing.T, b string) (string, string) {
			op := mkdir(t, mkdir(t, b, "c"), "oprov-python")
			symlink(t, mkdir(t, b, "elsewhere"), op+"/pycache")
			return b + "/c", mkdir(t, b, "t")
		}, "tmp"},
		{"cache a link of this user's to a private directory", func(t *testing.T, b string) (string, string) {
			symlink(t, "real/./", b+"/c")
			mkdir(t, b, "real")
			return b + "/c", mkdir(t, b, "t")
		}, "cache"},
		{"cache a link to a directory writable by others", func(t *testing.T, b string) (string, string) {
			symlink(t, "../"+filepath.Base(b)+"/open", b+"/c")
			mode(mkdir(t, b, "open"), 0o777)
			return b + "/c", mkdir(t, b, "t")
		}, "tmp"},
		{"cache a link of another user's in a sticky directory", func(t *testing.T, b string) (string, string) {
			s := mode(mkdir(t, b, "s"), 0o777|os.ModeSticky)
			symlink(t, mkdir(t, b, "real"), s+"/c")
			asOther(t, s+"/c")
			return s + "/c", mkdir(t, b, "t")
		}, "tmp"},
		{"relative cache", func(t *testing.T, b string) (string, string) { return "rel/cache", b }, "tmp"},
		{"both refused", func(t *testing.T, b string) (string, string) {
			return mode(mkdir(t, b, "c"), 0o777), mode(mkdir(t, b, "t"), 0o777)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			cache, tmp := tc.setup(t, base)
			want := map[string]string{"cache": cache + "/oprov-python/pycache", "tmp": tmp + "/oprov-python-" + uid + "/pycache", "": ""}[tc.want]
			if got := runPlace(t, cache, tmp); got != want {
				t.Fatalf("prefix %q, want %q", got, want)
			}
			if want == "" {
				return
			}
			for _, p := range []string{want, filepath.Dir(want)} {
				if st, err := os.Lstat(p); err != nil || st.Mode()&0o077 != 0 && p == want || !st.IsDir() {
					t.Errorf("%s: %v %v, want a directory, pycache 0700", p, st.Mode(), err)
				}
			}
		})
	}
	t.Run("an open pycache of this user's is closed", func(t *testing.T) {
		base := t.TempDir()
		p := mode(mkdir(t, mkdir(t, base, "oprov-python"), "pycache"), 0o755)
		if got := runPlace(t, base, base); got != p {
			t.Fatalf("prefix %q, want %q", got, p)
		}
		if st, _ := os.Stat(p); st.Mode().Perm() != 0o700 {
			t.Errorf("pycache mode %v, want 0700", st.Mode())
		}
	})
}

func mkdir(t *testing.T, parent, name string) string {
	t.Helper()
	p := filepath.Join(parent, name)
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
