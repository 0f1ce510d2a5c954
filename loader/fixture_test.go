package loader_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// world is an in-process registry holding example.com/acme/hello 1.0.0, 1.1.0 and 2.0.0 and
// example.com/acme/other 0.1.0, all signed with key, and a cache.
type world struct {
	reg   *testfix.Registry
	key   *testfix.Key
	repos map[string]*testfix.Repo               // by provider type
	rels  map[string]map[string]*testfix.Release // by type, then version
	cache *cache.Cache
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{reg: testfix.StartRegistry(t), key: testfix.SharedKey(t, 0), repos: map[string]*testfix.Repo{}, rels: map[string]map[string]*testfix.Release{}, cache: testfix.Cache(t)}
	for typ, vs := range map[string][]string{"hello": {"1.0.0", "1.1.0", "2.0.0"}, "other": {"0.1.0"}} {
		w.rels[typ] = map[string]*testfix.Release{}
		for _, v := range vs {
			w.push(t, testfix.NewRelease(t, typ, v))
		}
	}
	return w
}

// push publishes a release (signed with the world's key) into its type's repository.
func (w *world) push(t *testing.T, rel *testfix.Release) {
	t.Helper()
	if w.repos[rel.Type] == nil {
		w.repos[rel.Type] = w.reg.Repo(t, "providers/acme/"+rel.Type)
	}
	if w.rels[rel.Type] == nil {
		w.rels[rel.Type] = map[string]*testfix.Release{}
	}
	w.repos[rel.Type].PushSigned(t, rel, w.key)
	w.rels[rel.Type][rel.Version] = rel
}

// opts are a command's options over the world's registry and cache.
func (w *world) opts() loader.Options {
	return loader.Options{Cache: w.cache, Registry: oci.NewClient(w.reg.Options)}
}

// project writes a configuration directory: oprov.hcl with one oci_mirror block for
// example.com/acme/* (trusting the world's key), a main.tf requiring each provider in reqs (type
// -> constraint) and hashicorp/random, and the lock file when lock is not "".
func (w *world) project(t *testing.T, reqs map[string]string, lock string) string {
	t.Helper()
	return w.projectTrusting(t, reqs, lock, "public_keys = [\""+w.key.PubPath+"\"]")
}

// projectTrusting is project with the oci_mirror block's trust settings given as written.
func (w *world) projectTrusting(t *testing.T, reqs map[string]string, lock, trust string) string {
	t.Helper()
	dir := t.TempDir()
	var tf strings.Builder
	tf.WriteString("terraform {\n  required_providers {\n    random = { source = \"hashicorp/random\", version = \"~> 3.0\" }\n")
	for typ, c := range reqs {
		tf.WriteString("    " + typ + " = { source = \"example.com/acme/" + typ + "\", version = \"" + c + "\" }\n")
	}
	tf.WriteString("  }\n}\n")
	files := map[string]string{
		config.FileName: "oci_mirror {\n  repository_template = \"" + w.reg.Host + "/providers/${namespace}/${type}\"\n" +
			"  include = [\"example.com/acme/*\"]\n  " + trust + "\n}\n",
		"main.tf": tf.String(),
	}
	if lock != "" {
		files[config.LockFileName] = lock
	}
	testfix.WriteFiles(t, dir, files)
	return dir
}

func open(t *testing.T, dir string) *loader.Project {
	t.Helper()
	p, err := loader.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lockBlock renders a lock file's provider block.
func lockBlock(addr, version, constraints string, hashes ...string) string {
	s := "provider \"" + addr + "\" {\n  version     = \"" + version + "\"\n  constraints = \"" + constraints + "\"\n  hashes = [\n"
	for _, h := range hashes {
		s += "    \"" + h + "\",\n"
	}
	return s + "  ]\n}\n"
}

// randomBlock is a lock entry oprov does not manage, which it must leave byte for byte.
const randomBlock = `provider "registry.opentofu.org/hashicorp/random" {
  version     = "3.6.0"
  constraints = "~> 3.0"
  hashes = [
    "h1:notOursToTouch=",   # kept as written
  ]
}
`

// readLock reads the project's lock entry for addr.
func readLock(t *testing.T, dir, addr string) *config.LockEntry {
	t.Helper()
	l, err := config.ReadLock(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l.Entries[addr]
}

// unpacked lists every provider executable under root, wherever a cache keeps them.
func unpacked(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasPrefix(d.Name(), "terraform-provider-") && !strings.HasSuffix(d.Name(), ".zip") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

// executable reads the provider executable of an installed package, which must lie in its
// unpacked package under the mirror root.
func executable(t *testing.T, in loader.Installed) string {
	t.Helper()
	addr := testfix.Addr(t, in.Addr)
	want := filepath.Join(in.MirrorRoot, addr.Hostname.String(), addr.Namespace, addr.Type, in.Version, in.Platform)
	if filepath.Dir(in.Executable) != want || !strings.HasPrefix(filepath.Base(in.Executable), "terraform-provider-"+addr.Type) {
		t.Errorf("%s: executable %s, want terraform-provider-%s... in %s", in.Addr, in.Executable, addr.Type, want)
	}
	data, err := os.ReadFile(in.Executable)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

const (
	hello = "example.com/acme/hello"
	other = "example.com/acme/other"
)
