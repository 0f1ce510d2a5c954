package module

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/oci"
)

func TestHostileRegistry(t *testing.T) {
	t.Run("lists a version it does not serve", func(t *testing.T) {
		w := newWorld(t)
		w.reg.set(func() { w.reg.versions["acme/vpc/aws"] = append(w.reg.versions["acme/vpc/aws"], "1.9.0") })
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "1.9.0") || !strings.Contains(err.Error(), "module.vpc") || !strings.Contains(err.Error(), "404") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("lists what is no version", func(t *testing.T) {
		w := newWorld(t)
		w.reg.set(func() { w.reg.versions["acme/vpc/aws"] = []string{"1.0.0", "latest; rm -rf /"} })
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "is not a version") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("an endless versions answer", func(t *testing.T) {
		w := newWorld(t)
		w.reg.set(func() {
			w.reg.override = func(rw http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/versions") {
					return false
				}
				chunk := bytes.Repeat([]byte(" "), 1<<20)
				for i := 0; i < 8; i++ {
					if _, err := rw.Write(chunk); err != nil {
						break
					}
				}
				return true
			}
		})
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("X-Terraform-Get at a huge archive", func(t *testing.T) {
		w := newWorld(t)
		w.opts.Limits.MaxPackage = 64 << 10
		w.reg.set(func() { w.reg.files["/archives/vpc-1.1.0.tar.gz"] = bytes.Repeat([]byte("x"), 200<<10) })
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "over the limit") || !strings.Contains(err.Error(), "module.vpc") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("X-Terraform-Get at an archive that unpacks huge", func(t *testing.T) {
		w := newWorld(t)
		w.opts.Limits.MaxPackage = 1 << 20
		w.reg.set(func() {
			w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, map[string]string{"main.tf": strings.Repeat("#", 4<<20)})
		})
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "a bomb") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("X-Terraform-Get at a forbidden getter", func(t *testing.T) {
		w := newWorld(t)
		w.reg.set(func() { w.reg.location["acme/vpc/aws/1.1.0"] = "git::ext::sh -c 'touch /tmp/oprov-pwned'" })
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "not a git or HTTP(S) archive address") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("an archive with a link", func(t *testing.T) {
		w := newWorld(t)
		w.reg.set(func() {
			w.reg.files["/archives/web.zip"] = zipWithSymlink(t)
		})
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), "module.app.module.web") || !strings.Contains(err.Error(), "unsafe archive") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestCyclesAndDepthAreBounded(t *testing.T) {
	w := newWorld(t)
	self := w.reg.host() + "/acme/loop/aws"
	w.reg.set(func() {
		w.reg.versions["acme/loop/aws"] = []string{"1.0.0"}
		w.reg.location["acme/loop/aws/1.0.0"] = "/archives/loop.tar.gz"
		w.reg.files["/archives/loop.tar.gz"] = tarGz(t, map[string]string{"main.tf": "module \"again\" {\n  source = \"" + self + "\"\n}\n"})
	})
	writeTree(t, w.dir, map[string]string{"main.tf": "module \"loop\" {\n  source = \"" + self + "\"\n}\n"})
	os.RemoveAll(filepath.Join(w.dir, "app"))
	_, err := w.walk(t)
	if err == nil || !strings.Contains(err.Error(), "a cycle") || !strings.Contains(err.Error(), "module.loop.module.again") {
		t.Fatalf("got %v", err)
	}
	// A chain of distinct sources deeper than the bound.
	w.opts.Limits.MaxDepth = 3
	w.reg.set(func() {
		for i := 0; i < 6; i++ {
			name := "acme/d" + string(rune('a'+i)) + "/aws"
			next := w.reg.host() + "/acme/d" + string(rune('a'+i+1)) + "/aws"
			w.reg.versions[name] = []string{"1.0.0"}
			w.reg.location[name+"/1.0.0"] = "/archives/" + string(rune('a'+i)) + ".tar.gz"
			w.reg.files["/archives/"+string(rune('a'+i))+".tar.gz"] = tarGz(t, map[string]string{"main.tf": "module \"m\" {\n  source = \"" + next + "\"\n}\n"})
		}
	})
	writeTree(t, w.dir, map[string]string{"main.tf": "module \"m\" {\n  source = \"" + w.reg.host() + "/acme/da/aws\"\n}\n"})
	_, err = w.walk(t)
	if err == nil || !strings.Contains(err.Error(), "deeper than 3") {
		t.Fatalf("got %v", err)
	}
}

// TestWalkBudget: the walk as a whole is bounded, each limit named in its refusal: a gzip
// stream that expands past the ratio (whatever budget is left), and packages, each within the
// package limits, that together pass the walk's byte or file budget.
func TestWalkBudget(t *testing.T) {
	noise := func(n int) string { // text that compresses little, as a module's files might not
		var b strings.Builder
		x := uint32(1)
		for b.Len() < n {
			x = x*1664525 + 1013904223
			b.WriteString(strconv.FormatUint(uint64(x), 36))
		}
		return b.String()
	}
	t.Run("a gzip bomb", func(t *testing.T) {
		// 64 files of 1 MiB of zeros: each under any per-entry ratio check, the whole under the
		// package limit, 64 KiB of gzip. It is stopped at its first MiB.
		w := newWorld(t)
		bomb := map[string]string{"main.tf": ""}
		for i := 0; i < 64; i++ {
			bomb["f"+strconv.Itoa(i)+".bin"] = strings.Repeat("\x00", 1<<20)
		}
		w.reg.set(func() { w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, bomb) })
		_, err := w.walk(t)
		var le *oci.LimitError
		if !errors.As(err, &le) || le.Setting != SettingMaxModuleRatio || !strings.Contains(err.Error(), "module.vpc") || !strings.Contains(err.Error(), "expansion limit of 200x") {
			t.Fatalf("got %v, want the expansion limit", err)
		}
	})
	t.Run("one archive past the byte budget", func(t *testing.T) {
		w := newWorld(t)
		w.opts.Limits.MaxBytes = 1 << 20
		w.reg.set(func() {
			w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, map[string]string{"main.tf": "", "a.tf": "# " + noise(3<<20)})
		})
		_, err := w.walk(t)
		var le *oci.LimitError
		if !errors.As(err, &le) || le.Setting != SettingMaxModuleBytes || !strings.Contains(err.Error(), "module.vpc") || !strings.Contains(err.Error(), "byte budget of 1 MiB") {
			t.Fatalf("got %v, want the byte budget", err)
		}
	})
	t.Run("packages past the byte budget together", func(t *testing.T) {
		w := newWorld(t)
		w.opts.Limits.MaxBytes = 1 << 20
		w.reg.set(func() {
			for _, v := range []string{"1.1.0"} {
				w.reg.files["/archives/vpc-"+v+".tar.gz"] = tarGz(t, map[string]string{"main.tf": "", "a.tf": "# " + noise(600<<10)})
			}
			w.reg.files["/archives/web.zip"] = zipOf(t, map[string]string{"main.tf": "# " + noise(600<<10)})
		})
		_, err := w.walk(t)
		var le *oci.LimitError
		if !errors.As(err, &le) || le.Setting != SettingMaxModuleBytes || !strings.Contains(err.Error(), "module.app.module.web") {
			t.Fatalf("got %v, want the byte budget, at the second package", err)
		}
		// Held once each (what the origin gave goes once zipped), the same packages fit in 1.5 MiB.
		w.opts.Limits.MaxBytes = 3 << 19
		if _, err := w.walk(t); err != nil {
			t.Fatalf("with room for one copy of each package: %v", err)
		}
	})
	t.Run("past the file budget", func(t *testing.T) {
		w := newWorld(t)
		w.opts.Limits.MaxTotalFiles = 20
		files := map[string]string{"main.tf": ""}
		for i := 0; i < 30; i++ {
			files["f"+strconv.Itoa(i)+".tf"] = ""
		}
		w.reg.set(func() { w.reg.files["/archives/vpc-1.1.0.tar.gz"] = tarGz(t, files) })
		_, err := w.walk(t)
		var le *oci.LimitError
		if !errors.As(err, &le) || le.Setting != SettingMaxModuleFiles || !strings.Contains(err.Error(), "file budget of 20 files") {
			t.Fatalf("got %v, want the file budget", err)
		}
	})
}

// fanOut writes a chain of local modules m1..m<depth> under dir, each calling the next n times
// (c0, c1, ...), the root calling m1 n times: n^depth calls in all, in depth+1 small files. The
// last module requires a provider, and calls what leaf says (a module block's body), if anything.
func fanOut(t *testing.T, dir string, n, depth int, leaf string) {
	t.Helper()
	files := map[string]string{}
	for level := 0; level <= depth; level++ {
		var b strings.Builder
		next := "./m1"
		name := "main.tf"
		if level > 0 {
			next = "../m" + strconv.Itoa(level+1)
			name = "m" + strconv.Itoa(level) + "/main.tf"
		}
		if level == depth {
			b.WriteString("terraform {\n  required_providers {\n    null = { source = \"hashicorp/null\" }\n  }\n}\n")
			if leaf != "" {
				b.WriteString("module \"r\" {\n" + leaf + "}\n")
			}
		} else {
			for i := 0; i < n; i++ {
				b.WriteString("module \"c" + strconv.Itoa(i) + "\" {\n  source = \"" + next + "\"\n}\n")
			}
		}
		files[name] = b.String()
	}
	writeTree(t, dir, files)
}

// TestLocalFanOutIsBounded: local modules that call one another many times over are read once
// each (a walk that followed every call path would read 10^6 frames here), and the calls a walk
// follows are bounded as a whole, the bound named in the refusal.
func TestLocalFanOutIsBounded(t *testing.T) {
	t.Run("read once", func(t *testing.T) {
		dir := t.TempDir()
		fanOut(t, dir, 10, 6, "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tr, err := Walk(ctx, dir, Options{})
		if err != nil {
			t.Fatalf("a walk of 7 small files: %v", err)
		}
		if len(tr.Requirements) != 1 {
			t.Fatalf("requirements %v, want the null provider", tr.Requirements)
		}
		if _, _, err := Local(dir); err != nil {
			t.Fatalf("Local: %v", err)
		}
	})
	t.Run("each call path its own entry", func(t *testing.T) {
		w := newWorld(t)
		os.RemoveAll(filepath.Join(w.dir, "app"))
		os.Remove(filepath.Join(w.dir, "main.tf"))
		fanOut(t, w.dir, 2, 2, "  source = \"https://"+w.reg.host()+"/archives/web.zip\"\n")
		tr, err := w.walk(t)
		if err != nil {
			t.Fatal(err)
		}
		m := byKey(tr)
		for _, k := range []string{"c0.c0.r", "c0.c1.r", "c1.c0.r", "c1.c1.r"} {
			if m[k] == nil || m[k].Call != "module."+strings.ReplaceAll(k, ".", ".module.") {
				t.Errorf("no module %s in %v", k, m)
			}
		}
		if len(m) != 4 {
			t.Errorf("%d modules, want 4", len(m))
		}
	})
	t.Run("the walk-wide call limit", func(t *testing.T) {
		w := newWorld(t)
		os.RemoveAll(filepath.Join(w.dir, "app"))
		os.Remove(filepath.Join(w.dir, "main.tf"))
		// Each leaf calls a remote module, so no call path can be skipped: 10^3 of them.
		fanOut(t, w.dir, 10, 3, "  source = \"https://"+w.reg.host()+"/archives/web.zip\"\n")
		w.opts.Limits.MaxModules = 5000
		w.opts.Limits.MaxCalls = 300
		_, err := w.walk(t)
		var le *oci.LimitError
		if !errors.As(err, &le) || le.Setting != SettingMaxModuleCalls || !strings.Contains(err.Error(), "call limit of 300") {
			t.Fatalf("got %v, want the call limit", err)
		}
	})
}

// sparseTar is a tar holding one PAX sparse file (format 1.0): name, realsize bytes long, all a
// hole but its last byte, in ~2 KiB of archive. Go's tar writer writes no sparse files, so the
// blocks are built here.
func sparseTar(name string, realsize int64) []byte {
	block := func(name string, typ byte, size int) []byte {
		b := make([]byte, 512)
		copy(b, name)
		copy(b[100:], "0000644\x00")
		copy(b[108:], "0000000\x00")
		copy(b[116:], "0000000\x00")
		copy(b[124:], fmt.Sprintf("%011o\x00", size))
		copy(b[136:], "00000000000\x00")
		b[156] = typ
		copy(b[257:], "ustar\x0000")
		copy(b[148:], "        ")
		sum := 0
		for _, c := range b {
			sum += int(c)
		}
		copy(b[148:], fmt.Sprintf("%06o\x00 ", sum))
		return b
	}
	pad := func(b []byte) []byte { return append(b, make([]byte, (512-len(b)%512)%512)...) }
	var pax []byte
	for _, kv := range [][2]string{{"GNU.sparse.major", "1"}, {"GNU.sparse.minor", "0"},
		{"GNU.sparse.name", name}, {"GNU.sparse.realsize", strconv.FormatInt(realsize, 10)}} {
		rec := " " + kv[0] + "=" + kv[1] + "\n"
		n := len(rec) + 1
		for len(strconv.Itoa(n))+len(rec) != n {
			n++
		}
		pax = append(pax, strconv.Itoa(n)+rec...)
	}
	var out []byte
	out = append(out, block("PaxHeaders/big", 'x', len(pax))...)
	out = append(out, pad(pax)...)
	sparseMap := pad([]byte("1\n" + strconv.FormatInt(realsize-1, 10) + "\n1\n"))
	out = append(out, block("GNUSparseFile/big", '0', len(sparseMap)+1)...)
	out = append(out, sparseMap...)
	out = append(out, pad([]byte("x"))...)
	return append(out, make([]byte, 1024)...)
}

// TestSparseTarIsRefused: a tar entry with holes unpacks to what its header says, not to what the
// archive holds: a 64 MiB file from ~2 KiB of tar, past any expansion check on the gzip stream.
// It is refused by name, as tar and as tar.gz.
func TestSparseTarIsRefused(t *testing.T) {
	for _, gz := range []bool{true, false} {
		w := newWorld(t)
		body := sparseTar("big.tf", 64<<20)
		path := "/archives/vpc-1.1.0.tar.gz"
		if gz {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(body)
			zw.Close()
			body = buf.Bytes()
		} else {
			w.reg.set(func() { w.reg.location["acme/vpc/aws/1.1.0"] = "/archives/vpc-1.1.0.tar" })
			path = "/archives/vpc-1.1.0.tar"
		}
		w.reg.set(func() { w.reg.files[path] = body })
		_, err := w.walk(t)
		if err == nil || !strings.Contains(err.Error(), `"big.tf"`) || !strings.Contains(err.Error(), "sparse") || !strings.Contains(err.Error(), "module.vpc") {
			t.Fatalf("gzip %v: got %v, want the sparse entry refused", gz, err)
		}
	}
}

// TestGitTreeIsMeasuredBeforeCheckout: a repository whose tree is larger than the walk's budget
// (a blob that compresses to almost nothing) is refused from what the tree lists, before git
// checks it out: the git program, logged here, is never asked to.
func TestGitTreeIsMeasuredBeforeCheckout(t *testing.T) {
	g := newGitRepos(t)
	g.commit(t, "big.git", "v1", map[string]string{"main.tf": "", "big.bin": strings.Repeat("\x00", 4<<20)})
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	bin := t.TempDir()
	logf := filepath.Join(bin, "log")
	wrapper := filepath.Join(bin, "git")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\necho \"$@\" >> '"+logf+"'\nexec '"+real+"' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"main.tf": "module \"m\" {\n  source = \"git::" + g.url("big.git") + "?ref=v1\"\n}\n"})
	_, err = Walk(context.Background(), dir, Options{Git: wrapper, Limits: Limits{MaxBytes: 1 << 20}})
	var le *oci.LimitError
	if !errors.As(err, &le) || le.Setting != SettingMaxModuleBytes || !strings.Contains(err.Error(), "module.m") || !strings.Contains(err.Error(), "byte budget of 1 MiB") || !strings.Contains(err.Error(), "before checkout") {
		t.Fatalf("got %v, want the byte budget", err)
	}
	log, _ := os.ReadFile(logf)
	if strings.Contains(string(log), " checkout ") {
		t.Errorf("git checked the tree out before it was measured:\n%s", log)
	}
}
