package module

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
