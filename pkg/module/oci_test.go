package module

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/internal/testing/testfix"
	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/sign"
)

// ociWorld is a configuration calling one oci:// module in a registry of ours.
type ociWorld struct {
	dir  string
	reg  *testfix.Registry
	repo *testfix.Repo
	key  *testfix.Key
	opts Options
}

func newOCIWorld(t *testing.T, signed bool) *ociWorld {
	w := &ociWorld{dir: t.TempDir(), reg: testfix.StartRegistry(t), key: testfix.SharedKey(t, 0)}
	w.repo = w.reg.Repo(t, "modules/net")
	w.push(t, "output \"v\" { value = 1 }\n", signed)
	writeTree(t, w.dir, map[string]string{"main.tf": "module \"net\" {\n  source = \"oci://" + w.reg.Host + "/modules/net?tag=1.0.0\"\n}\n"})
	w.opts = Options{Registry: w.reg.Options, Policies: []*sign.Policy{trusting(w.key)}}
	return w
}

// push publishes a module tree as 1.0.0 (signed by the world's key when signed).
func (w *ociWorld) push(t *testing.T, mainTF string, signed bool) {
	t.Helper()
	src := t.TempDir()
	writeTree(t, src, map[string]string{"main.tf": mainTF, "sub/a.tf": "# a\n"})
	zip, err := modulepkg.Zip(src)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := modulepkg.Push(context.Background(), w.repo.Target, zip, "1.0.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if signed {
		w.repo.Sign(t, desc, "1.0.0", w.key)
	}
}

// trusting is a policy trusting keys for every repository, as public_keys makes.
func trusting(keys ...*testfix.Key) *sign.Policy {
	rule := &sign.Rule{Name: "modules", Mode: sign.ModeEnforce, Repositories: []string{"**"}}
	for _, k := range keys {
		rule.Keys = append(rule.Keys, k.Public)
	}
	return &sign.Policy{Path: "oprov.hcl", Mode: sign.ModeEnforce, Rules: []*sign.Rule{rule}}
}

func TestOCIModuleVerified(t *testing.T) {
	w := newOCIWorld(t, true)
	tr, err := Walk(context.Background(), w.dir, w.opts)
	if err != nil {
		t.Fatal(err)
	}
	r := tr.Modules[0]
	if !strings.HasPrefix(r.Version, "sha256:") || !strings.Contains(r.Auth, "cosign") {
		t.Errorf("version %q auth %q", r.Version, r.Auth)
	}
	// The zh: of an OCI module is that of the published zip itself.
	if want := "zh:" + strings.TrimPrefix(modulepkg.LayerDescriptor(r.Zip).Digest.String(), "sha256:"); r.ZH != want {
		t.Errorf("zh %s, want %s", r.ZH, want)
	}
}

func TestOCIModuleRefused(t *testing.T) {
	t.Run("signed by a key the policy does not trust", func(t *testing.T) {
		w := newOCIWorld(t, true)
		w.opts.Policies = []*sign.Policy{trusting(testfix.SharedKey(t, 1))}
		_, err := Walk(context.Background(), w.dir, w.opts)
		if err == nil || !strings.Contains(err.Error(), "module.net") || !strings.Contains(err.Error(), "main.tf:1") || !strings.Contains(err.Error(), "signature") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		w := newOCIWorld(t, false)
		_, err := Walk(context.Background(), w.dir, w.opts)
		if err == nil || !strings.Contains(err.Error(), "module.net") || !strings.Contains(err.Error(), "signature") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("tag moved since it was locked", func(t *testing.T) {
		w := newOCIWorld(t, true)
		tr, err := Walk(context.Background(), w.dir, w.opts)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := ReadLock(w.dir)
		l.Record(tr)
		if err := l.Write(); err != nil {
			t.Fatal(err)
		}
		w.opts.Lock, _ = ReadLock(w.dir)
		w.push(t, "output \"v\" { value = 2 }\n", true)
		_, err = Walk(context.Background(), w.dir, w.opts)
		if !errors.Is(err, ErrLockMismatch) || !strings.Contains(err.Error(), tr.Modules[0].Version) || !strings.Contains(err.Error(), tr.Modules[0].H1) {
			t.Fatalf("got %v", err)
		}
		if _, err := os.Stat(filepath.Join(w.dir, ".terraform")); err == nil {
			t.Error("something was installed")
		}
	})
}
