package loader

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// A far side whose cache is at its bound takes no zip from a near side, and says which bound.
func TestHostCacheBound(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	req, zp := hostRequest(t, r, r.H1(testfix.Host()))
	answer, asked, err := nearSide(t, HostOptions{Cache: testfix.Cache(t), CacheLimit: 100}, req, zp)
	msg, _ := answer["error"].(string)
	if asked || err == nil || !strings.Contains(msg, "over its bound of 100 bytes") {
		t.Fatalf("a zip past the cache bound: asked %v, answer %v, err %v", asked, answer, err)
	}
}

// farWorld is a registry holding example.com/acme/hello (signed with the far operator's key),
// example.com/acme/stranger (signed with another key) and example.com/acme/other (signed with
// the operator's key), and a far side's configuration that allows hello and stranger, requires the
// operator's key, and gives hello a sandbox with a cloud provider's credentials.
type farWorld struct {
	reg  *testfix.Registry
	rels map[string]*testfix.Release
	cfg  *config.HostConfig
}

func newFarWorld(t *testing.T) *farWorld {
	t.Helper()
	w := &farWorld{reg: testfix.StartRegistry(t), rels: map[string]*testfix.Release{}}
	op, other := testfix.SharedKey(t, 0), testfix.SharedKey(t, 1)
	for typ, key := range map[string]*testfix.Key{"hello": op, "stranger": other, "other": op} {
		rel := testfix.NewRelease(t, typ, "1.0.0", testfix.Host())
		w.reg.Repo(t, "providers/acme/"+typ).PushSigned(t, rel, key)
		w.rels[typ] = rel
	}
	dir := t.TempDir()
	creds := filepath.Join(dir, "creds")
	testfix.WriteFiles(t, creds, map[string]string{"token": "x"})
	path := filepath.Join(dir, "host.hcl")
	testfix.WriteFiles(t, dir, map[string]string{"host.hcl": `oci_mirror {
  repository_template = "` + w.reg.Host + `/providers/${namespace}/${type}"
  include             = ["example.com/acme/hello", "example.com/acme/stranger"]
  public_keys         = ["` + op.PubPath + `"]
}

sandbox "example.com/acme/hello" {
  env     = ["CLOUD_*"]
  connect = [8080]
  read    = ["` + creds + `"]
  memory  = "8GiB"
}
`})
	var err error
	if w.cfg, err = config.LoadHostConfig(path); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *farWorld) request(t *testing.T, typ, sandbox string) (plugin.RemoteRequest, string) {
	t.Helper()
	r := w.rels[typ]
	req, zp := hostRequest(t, r, r.H1(testfix.Host()))
	req.Address = "example.com/acme/" + typ
	req.Filename = "terraform-provider-" + typ + "_" + r.Version + "_" + testfix.Host().String() + ".zip"
	if sandbox != "" {
		req.Sandbox = []byte(`{"label":"example.com/acme/` + typ + `","file":"oprov.hcl","line":7,` + sandbox + `}`)
	}
	return req, zp
}

func (w *farWorld) host(t *testing.T) HostOptions {
	return HostOptions{Cache: testfix.Cache(t), Config: w.cfg, RequireSandbox: true, Registry: oci.NewClient(w.reg.Options)}
}

// With a far configuration, a provider runs only when it allows it and its own check of the
// release passes; the request may narrow the operator's sandbox and is refused past it, naming
// the operator's block.
func TestHostFarConfiguration(t *testing.T) {
	w := newFarWorld(t)
	refused := func(t *testing.T, typ, sandbox string, want ...string) {
		t.Helper()
		req, zp := w.request(t, typ, sandbox)
		answer, asked, err := nearSide(t, w.host(t), req, zp)
		msg, _ := answer["error"].(string)
		if asked || err == nil {
			t.Fatalf("%s with sandbox {%s}: asked for the zip %v, answer %v, err %v", typ, sandbox, asked, answer, err)
		}
		t.Logf("refused: %s", msg)
		for _, s := range want {
			if !strings.Contains(msg, s) {
				t.Errorf("the refusal lacks %q: %s", s, msg)
			}
		}
	}
	launched := func(t *testing.T, typ, sandbox string) {
		t.Helper()
		req, zp := w.request(t, typ, sandbox)
		answer, asked, _ := nearSide(t, w.host(t), req, zp)
		msg, _ := answer["error"].(string)
		// The fixture is a shell script the sandbox does not let run: reaching that is passing
		// every check before the launch.
		if !asked || !strings.Contains(msg, "oprov sandbox: exec") {
			t.Fatalf("%s with sandbox {%s}: want it checked and launched (under the sandbox), got asked %v, answer %v", typ, sandbox, asked, answer)
		}
	}
	t.Run("allowed", func(t *testing.T) { launched(t, "hello", "") })
	t.Run("narrowed", func(t *testing.T) {
		launched(t, "hello", `"env":["CLOUD_TOKEN"],"connect":[8080],"memory":4294967296`)
	})
	t.Run("not allowed", func(t *testing.T) {
		refused(t, "other", "", "may not run on this host", w.cfg.Path)
	})
	t.Run("signed by another key", func(t *testing.T) {
		refused(t, "stranger", "", "the far side's own check", "oci_mirror at "+w.cfg.Path+":1")
	})
	for name, sb := range map[string]string{
		"read /":       `"read":["/"]`,
		"env AWS_*":    `"env":["AWS_*"]`,
		"env CLOUD*":   `"env":["CLOUD*"]`,
		"connect 22":   `"connect":[22]`,
		"more memory":  `"memory":17179869184`,
		"best effort":  `"best_effort":true`,
		"write ~/.ssh": `"write":["~/.ssh"]`,
	} {
		t.Run("widen "+name, func(t *testing.T) {
			refused(t, "hello", sb, "beyond the far side's sandbox", w.cfg.Path+":7")
		})
	}
	t.Run("a zip the registry does not hold", func(t *testing.T) {
		req, zp := w.request(t, "hello", "")
		rep := w.rels["hello"].Republished(t)
		req.Zip, req.H1 = rep.Zip(testfix.Host()).String(), []string{rep.H1(testfix.Host())}
		st, _ := os.Stat(rep.ZipPath(testfix.Host()))
		req.Size = st.Size()
		answer, asked, err := nearSide(t, w.host(t), req, zp)
		msg, _ := answer["error"].(string)
		if asked || err == nil || !strings.Contains(msg, "is not the one the far side's registry and policy vouch for") {
			t.Fatalf("asked %v, answer %v, err %v", asked, answer, err)
		}
	})
}

// The far side resolves a request's ~ and relative paths on its own machine: its own home.
func TestHostResolvesPathsInItsHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	b, err := nearSandbox([]byte(`{"label":"*","file":"oprov.hcl","line":1,"read":["~/.cloud","creds","/etc/x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(home, ".cloud"), filepath.Join(home, "creds"), "/etc/x"}
	if !slices.Equal(b.Read, want) {
		t.Errorf("read = %q, want %q", b.Read, want)
	}
	if _, err := nearSandbox([]byte(`{"label":"*","read":["~root/.ssh"]}`)); err == nil {
		t.Error("~root/.ssh was taken")
	}
}
