package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/sigstack"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// hostileVersion is what a hostile index says its version is: markup, which the catalog must show
// as text.
const hostileVersion = `<script>document.title="pwned"</script>`

// TestServeCatalogInBrowser: a real `oprov serve` over the TLS test registry serves two
// providers under a policy: hello 1.0.0 signed keyless by the release workflow (served), 1.1.0
// signed by the nightly workflow (refused), 0.9.0 a signed index whose version annotation is
// markup (refused, the markup shown as text); world 2.0.0 signed with a key (served), 2.1.0
// unsigned (refused). Headless Chromium loads / and the test reads what it rendered; a screenshot
// is taken (OPROV_CATALOG_SCREENSHOT=FILE keeps it, as docs/serve-catalog.png was made).
func TestServeCatalogInBrowser(t *testing.T) {
	chromium := peers.Require(t, "chromium")
	st := sigstack.Start(t)
	reg := testreg.Start(t, testreg.Options{})
	ca := []string{"--ca-file", reg.CAFile}
	hello, world := reg.Host+"/providers/acme/hello", reg.Host+"/providers/acme/world"
	keyless := func(ref string, w sigstack.Workflow) {
		mustOprov(t, []string{"SIGSTORE_ID_TOKEN=" + st.Token(t, w)}, append([]string{"sign", ref,
			"--signing-config", st.SigningConfig, "--trusted-root", st.TrustedRoot}, ca...)...)
	}
	keyless(hello+"@"+versionedHello(t, reg, "providers/acme/hello", "1.0.0"), releaseWorkflow)
	keyless(hello+"@"+versionedHello(t, reg, "providers/acme/hello", "1.1.0"), nightlyWorkflow)
	keyless(hello+"@"+retaggedIndex(t, reg, "providers/acme/hello", "1.0.0", "0.9.0", hostileVersion), releaseWorkflow)

	keys := t.TempDir()
	mustOprov(t, []string{"COSIGN_PASSWORD=test-password"}, "keygen", "--output-key-prefix", filepath.Join(keys, "world"))
	for _, v := range []string{"2.0.0", "2.1.0"} {
		dist := t.TempDir()
		fakeRelease(t, dist, "world", v, "linux_amd64", "darwin_arm64", "windows_amd64", "linux_arm64")
		pushJSON(t, nil, append([]string{dist, world, "--address", "example.com/acme/world"}, ca...)...)
	}
	mustOprov(t, []string{"COSIGN_PASSWORD=test-password"}, append([]string{"sign", world + ":2.0.0", "--key", filepath.Join(keys, "world.key")}, ca...)...)
	st.Stop() // serving is offline

	policy := filepath.Join(keys, "policy.hcl")
	writeFile(t, policy, keylessPolicy(st, `"`+reg.Host+`/providers/acme/hello"`)+fmt.Sprintf(`
trust "acme-world" {
  repositories = [%q]
  keys         = ["world.pub"]
}
`, reg.Host+"/providers/acme/world"))
	s := startServe(t, []string{"HOME=" + t.TempDir()}, false, append(serveFromRegistry(t, reg.Host, reg.CAFile),
		"--policy", policy, "--include", "example.com/acme/hello,example.com/acme/world")...)
	waitForCatalog(t, s)

	dom := chromiumRun(t, chromium, "--dump-dom", s.URL)
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	expectCatalogRendered(t, doc, st)
	expectProviderPage(t, chromium, s, doc)
	shot := filepath.Join(t.TempDir(), "catalog.png")
	chromiumRun(t, chromium, "--screenshot="+shot, "--window-size=1200,900", s.URL)
	expectScreenshot(t, shot)
}

// expectCatalogRendered checks what Chromium rendered: each provider with its served versions and
// signers, the refused versions with their reasons, and the hostile value as text.
func expectCatalogRendered(t *testing.T, doc *html.Node, st *sigstack.Stack) {
	t.Helper()
	got := map[string][]string{} // provider -> "served VERSION | SIGNER" and "refused VERSION | WHY" rows
	var scripts int
	var provider string
	walkHTML(doc, func(n *html.Node) {
		switch {
		case n.Type == html.ElementNode && n.Data == "script":
			scripts++
		case n.Type == html.ElementNode && n.Data == "h2":
			provider = strings.TrimSpace(nodeText(n))
		case hasClass(n, "served"):
			got[provider] = append(got[provider], "served "+cellText(n, "version")+" | "+cellText(n, "signed")+" | "+cellText(n, "platforms"))
		case hasClass(n, "refused") && n.Data == "tr":
			got[provider] = append(got[provider], "refused "+cellText(n, "version")+" | "+cellText(n, "why"))
		}
	})
	if scripts != 0 {
		t.Errorf("the rendered page holds %d script elements, want none", scripts)
	}
	want := map[string][]string{
		"example.com/acme/hello": {
			"served 1.0.0 | " + releaseWorkflow.Subject(), "refused 1.1.0 | policy", "refused 0.9.0 | policy",
		},
		"example.com/acme/world": {"served 2.0.0 | world.pub", "refused 2.1.0 | policy"},
	}
	for p, rows := range want {
		if len(got[p]) != len(rows) {
			t.Fatalf("%s rendered as %q, want rows starting %q", p, got[p], rows)
		}
		for i, prefix := range rows {
			if !strings.HasPrefix(got[p][i], prefix) {
				t.Errorf("%s row %d: %q, want it to start %q", p, i, got[p][i], prefix)
			}
		}
	}
	hello, world := got["example.com/acme/hello"], got["example.com/acme/world"]
	for _, c := range []struct{ row, want string }{
		{hello[1], nightlyWorkflow.Subject()},                   // who signed 1.1.0, untrusted
		{hello[0], "(issuer " + st.Issuer.URL},                  // the keyless identity as verified
		{hello[0], "linux_amd64"},                               // its platforms
		{hello[2], "signed index is version " + hostileVersion}, // the registry's markup, as text
		{world[1], "not signed"},                                // why 2.1.0 is refused
		{world[0], "linux_arm64"},                               // its platforms
	} {
		if !strings.Contains(c.row, c.want) {
			t.Errorf("row %q lacks %q", c.row, c.want)
		}
	}
	if strings.Contains(world[0], "(issuer ") {
		t.Errorf("row %q names a keyless identity, want the key's name", world[0])
	}
}

// expectProviderPage follows the index's link to world's own page, which lists each platform's
// file, and links back.
func expectProviderPage(t *testing.T, chromium string, s *served, index *html.Node) {
	t.Helper()
	var href string
	walkHTML(index, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "a" && n.Parent != nil && n.Parent.Data == "h2" && nodeText(n) == "example.com/acme/world" {
			for _, a := range n.Attr {
				if a.Key == "href" {
					href = a.Val
				}
			}
		}
	})
	if href != "providers/example.com/acme/world" {
		t.Fatalf("world's link is %q, want providers/example.com/acme/world", href)
	}
	doc, err := html.Parse(strings.NewReader(chromiumRun(t, chromium, "--dump-dom", s.URL+href)))
	if err != nil {
		t.Fatal(err)
	}
	text := nodeText(doc)
	for _, want := range []string{"terraform-provider-world_2.0.0_linux_arm64.zip", "world.pub", "not signed", "Providers served"} {
		if !strings.Contains(text, want) {
			t.Errorf("world's page lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "example.com/acme/hello") {
		t.Errorf("world's page shows hello too:\n%s", text)
	}
}

// retaggedIndex puts the index that tag from names under tag to, its version annotation set to
// version, and gives its digest.
func retaggedIndex(t *testing.T, reg *testreg.Registry, repo, from, to, version string) string {
	t.Helper()
	c := reg.Client(t)
	const mt = "application/vnd.oci.image.index.v1+json"
	req, _ := http.NewRequest(http.MethodGet, reg.URL()+"/v2/"+repo+"/manifests/"+from, nil)
	req.Header.Set("Accept", mt)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var idx map[string]any
	if err := json.Unmarshal(data, &idx); err != nil {
		t.Fatalf("index of %s:%s: %v\n%s", repo, from, err, data)
	}
	idx["annotations"].(map[string]any)["org.opencontainers.image.version"] = version
	data, _ = json.Marshal(idx)
	req, _ = http.NewRequest(http.MethodPut, reg.URL()+"/v2/"+repo+"/manifests/"+to, bytes.NewReader(data))
	req.Header.Set("Content-Type", mt)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT %s:%s: %s", repo, to, resp.Status)
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// waitForCatalog waits for the server's first catalog round.
func waitForCatalog(t *testing.T, s *served) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, _, body := s.get(t, "/?format=json")
		var c struct{ Updated time.Time }
		json.Unmarshal(body, &c)
		if !c.Updated.IsZero() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catalog was not read within 2 minutes: %s\n%s", body, s.logText())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// chromiumRun runs headless Chromium on url with a fresh profile, offline but for 127.0.0.1, and
// gives its standard output. The server's certificate is from the local CA serve made, which
// this profile does not hold: certificate errors are ignored (the test's own client checks it).
func chromiumRun(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--ignore-certificate-errors", "--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// expectScreenshot checks the screenshot is a PNG of the window's size, and keeps it where
// OPROV_CATALOG_SCREENSHOT says.
func expectScreenshot(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 900 {
		t.Errorf("screenshot %dx%d, want 1200x900", b.Dx(), b.Dy())
	}
	if keep := os.Getenv("OPROV_CATALOG_SCREENSHOT"); keep != "" {
		writeFile(t, keep, string(data))
	}
}

func walkHTML(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walkHTML(c, fn)
	}
}

func nodeText(n *html.Node) string {
	var b strings.Builder
	walkHTML(n, func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteString(" ")
		}
	})
	return strings.Join(strings.Fields(b.String()), " ")
}

func hasClass(n *html.Node, class string) bool {
	if n.Type != html.ElementNode {
		return false
	}
	for _, a := range n.Attr {
		if a.Key == "class" {
			for _, c := range strings.Fields(a.Val) {
				if c == class {
					return true
				}
			}
		}
	}
	return false
}

// cellText is the text of the first element below n with the class.
func cellText(n *html.Node, class string) string {
	var out string
	found := false
	walkHTML(n, func(m *html.Node) {
		if !found && hasClass(m, class) {
			out, found = nodeText(m), true
		}
	})
	return out
}
