package module

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/modulepkg"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
	"github.com/oprov/oprov/tests/testkit/testfix"
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
	w.opts = Options{Registry: oci.NewClient(w.reg.Options), Policies: []*sign.Policy{trusting(w.key)}}
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

// TestMirrorStandsInForOrigins: modules locked from their origins are installed, with the origins
// gone, from module packages in an OCI registry (as a loaded bundle gives them), judged by the
// same lock entries: the zip oprov made of each origin's tree is the package's layer.
func TestMirrorStandsInForOrigins(t *testing.T) {
	w := lockedWorld(t)
	tr, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	reg := testfix.StartRegistry(t)
	key := testfix.SharedKey(t, 0)
	refs := map[string]oci.Ref{}
	for _, r := range tr.Modules {
		repo := reg.Repo(t, "mirror/"+r.Key)
		ann := map[string]string{modulepkg.AnnotationSource: r.Source, modulepkg.AnnotationVersion: r.Version}
		if r.Subdir != "" {
			ann[annotationSubdir] = r.Subdir
		}
		desc, err := modulepkg.Push(context.Background(), repo.Target, r.Zip, "v1", ann)
		if err != nil {
			t.Fatal(err)
		}
		repo.Sign(t, desc, "v1", key)
		refs[r.Source] = repo.Ref.WithReference("v1")
	}
	w.reg.srv.Close()
	w.git.srv.Close()
	w.opts.Registry = oci.NewClient(reg.Options)
	w.opts.Policies = []*sign.Policy{trusting(key)}
	w.opts.Mirror = func(ctx context.Context, r *Resolved, e *LockEntry) (oci.ReadOnly, oci.Ref, bool, error) {
		ref, ok := refs[r.Source]
		if !ok {
			return nil, oci.Ref{}, false, nil
		}
		tg, err := oci.NewClient(reg.Options).Open(ctx, ref, false)
		return tg, ref, err == nil, err
	}
	got, err := w.walk(t)
	if err != nil {
		t.Fatal(err)
	}
	want := byKey(tr)
	for _, r := range got.Modules {
		if w := want[r.Key]; r.H1 != w.H1 || r.ZH != w.ZH || r.Version != w.Version || !strings.Contains(r.Auth, "cosign") {
			t.Errorf("%s from the mirror: %s %s %s (%s), want %s %s %s", r.Key, r.Version, r.H1, r.ZH, r.Auth, w.Version, w.H1, w.ZH)
		}
	}
	if len(got.Modules) != len(tr.Modules) {
		t.Errorf("%d modules from the mirror, want %d", len(got.Modules), len(tr.Modules))
	}
	// A mirror whose package differs from the lock is refused like the origin would be.
	bad := reg.Repo(t, "mirror/bad")
	src := t.TempDir()
	writeTree(t, src, map[string]string{"main.tf": "# not the locked module\n"})
	z, _ := modulepkg.Zip(src)
	desc, _ := modulepkg.Push(context.Background(), bad.Target, z, "v1", map[string]string{modulepkg.AnnotationVersion: "1.1.0"})
	bad.Sign(t, desc, "v1", key)
	refs[w.reg.host()+"/acme/vpc/aws"] = bad.Ref.WithReference("v1")
	refused(t, w, ErrLockMismatch, "module.vpc")
}
