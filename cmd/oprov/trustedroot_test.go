package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/oprov/oprov/pkg/sign/trustedroot"
	"github.com/oprov/oprov/tests/testkit/sigstoretest"
	"github.com/oprov/oprov/tests/testkit/tufrepo"
)

// TestTrustedRootThroughTUF: trusted-root writes the trusted root pkg/sign/trustedroot fetched
// from a repository on 127.0.0.1 (and from a file:// mirror of it), says what it holds (text and
// -o json), keeps TUF's cache in oprov's cache directory; verify-blob then verifies a keyless
// signature of that Sigstore with it. What the TUF client refuses is tested in its package.
func TestTrustedRootThroughTUF(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cacheDir := t.TempDir()
	t.Setenv("OPROV_CACHE_DIR", cacheDir)
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	trJSON := sigstoretest.TrustedRoot(t, vs)
	files, rootJSON := tufrepo.New(t, trustedroot.Target, trJSON, tufrepo.Spec{})
	srv := tufrepo.Serve(t, files)
	dir := t.TempDir()
	rootFile := filepath.Join(dir, "root.json")
	writeFile(t, rootFile, string(rootJSON))
	out := filepath.Join(dir, "trusted_root.json")

	stdout, stderr, code := runCLI(t, "trusted-root", "--tuf-url", srv.URL, "--tuf-root", rootFile, "--to", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, trJSON) {
		t.Errorf("%s is not the target TUF vouches for", out)
	}
	for _, want := range []string{"Wrote " + out + ", the trusted root from " + srv.URL + " (checked through TUF)\n", "  certificate authorities: 1\n", "  timestamp authorities: 1\n", "  transparency logs: 1\n", "  certificate transparency logs: 0\n", "  valid 20"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "tuf")); err != nil {
		t.Errorf("no TUF cache in oprov's cache directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(home, ".sigstore")); err == nil {
		t.Errorf("TUF metadata was cached in ~/.sigstore, not oprov's cache directory")
	}

	// The file verifies a keyless signature of the Sigstore it describes.
	const who, issuer = "https://github.com/oprov/oprov/.github/workflows/release.yml@refs/tags/v1.0.0", "https://token.actions.githubusercontent.com"
	data := []byte("0123abcd  oprov_1.0.0_linux_amd64.tar.gz\n")
	sums := filepath.Join(dir, "SHA256SUMS")
	writeFile(t, sums, string(data))
	bundle := filepath.Join(dir, "SHA256SUMS.sigstore.json")
	writeFile(t, bundle, string(sigstoretest.TimestampedBlobBundle(t, vs, who, issuer, data)))
	stdout, stderr, code = runCLI(t, "verify-blob", sums, "--bundle", bundle, "--trusted-root", out,
		"--certificate-identity", who, "--certificate-oidc-issuer", issuer)
	if code != 0 || !strings.Contains(stdout, "signed keylessly by") {
		t.Errorf("verify-blob with the fetched root: exit %d\n%s%s", code, stdout, stderr)
	}

	t.Run("-o json, from a file:// mirror", func(t *testing.T) {
		mirror := t.TempDir()
		tufrepo.WriteDir(t, mirror, files)
		out := filepath.Join(t.TempDir(), "tr.json")
		stdout, stderr, code := runCLI(t, "trusted-root", "--tuf-url", "file://"+filepath.ToSlash(mirror), "--tuf-root", rootFile, "--to", out, "-o", "json")
		var got trustSummary
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
			t.Fatalf("exit %d, %v\n%s%s", code, err, stdout, stderr)
		}
		if got.File != out || got.Repository != "file://"+filepath.ToSlash(mirror) || len(got.CAs) != 1 || got.CAs[0].Start == nil || len(got.TSAs) != 1 || len(got.Logs) != 1 {
			t.Errorf("summary: %+v", got)
		}
		for _, key := range []string{`"file":`, `"repository":`, `"certificate_authorities":`, `"timestamp_authorities":`, `"transparency_logs":`, `"ct_logs":`, `"valid_from":`} {
			if !strings.Contains(stdout, key) {
				t.Errorf("-o json lacks %s:\n%s", key, stdout)
			}
		}
		if b, _ := os.ReadFile(out); !bytes.Equal(b, trJSON) {
			t.Errorf("%s is not the target", out)
		}
	})

	t.Run("control characters in a URI", func(t *testing.T) {
		var doc map[string]any
		if err := json.Unmarshal(trJSON, &doc); err != nil {
			t.Fatal(err)
		}
		doc["certificateAuthorities"].([]any)[0].(map[string]any)["uri"] = "https://fulcio.example\x1b]0;pwned\x07"
		target, _ := json.Marshal(doc)
		files, rootJSON := tufrepo.New(t, trustedroot.Target, target, tufrepo.Spec{})
		srv := tufrepo.Serve(t, files)
		dir := t.TempDir()
		rootFile := filepath.Join(dir, "root.json")
		writeFile(t, rootFile, string(rootJSON))
		stdout, stderr, code := runCLI(t, "trusted-root", "--tuf-url", srv.URL, "--tuf-root", rootFile, "--to", filepath.Join(dir, "tr.json"))
		if code != 0 || strings.ContainsAny(stdout, "\x1b\x07") || !strings.Contains(stdout, `"https://fulcio.example\x1b]0;pwned\a"`) {
			t.Errorf("exit %d: %q %s", code, stdout, stderr)
		}
	})
}

// TestTrustedRootExitCodes: each kind of failure of the TUF client comes out as its exit code
// (10 refused, 3 unreachable or timed out, 2 a bad flag or --tuf-root, 1 anything else) with the
// command's words for it, on stderr and, with -o json, as {"written": false, ...} on stdout; and
// nothing is written (a file already there is kept, nothing is left beside it).
func TestTrustedRootExitCodes(t *testing.T) {
	t.Setenv("OPROV_CACHE_DIR", t.TempDir())
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	trJSON := sigstoretest.TrustedRoot(t, vs)
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(hang) })
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	empty := tufrepo.Serve(t, map[string][]byte{})

	for _, tc := range []struct {
		name   string
		target string // the repository's one target
		body   []byte
		spec   tufrepo.Spec
		url    string // instead of the repository
		args   []string
		code   int
		want   string
	}{
		{name: "refused by TUF", target: trustedroot.Target, body: trJSON, spec: tufrepo.Spec{RogueTimestamp: true}, code: exitRefused,
			want: "trusted-root: refused what URL served: "},
		{name: "refused by TUF", target: trustedroot.Target, body: trJSON, spec: tufrepo.Spec{ExpiredTimestamp: true}, code: exitRefused,
			want: "; nothing was written (the mirror may be stale or tampered with; with --tuf-root, check it is this repository's root.json)"},
		{name: "not a trusted root", target: trustedroot.Target, body: []byte(`{"mediaType":"text/plain"}`), code: exitRefused,
			want: "trusted-root: URL holds a trusted_root.json that TUF vouches for, but it is not a trusted root: "},
		{name: "no certificate authority", target: trustedroot.Target, body: []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), code: exitRefused,
			want: "trusted-root: the trusted root from URL lists no certificate authority: it cannot vouch for a keyless signature; nothing was written"},
		{name: "refuses connections", url: closed.URL, code: exitUnreachable,
			want: "trusted-root: could not fetch from URL: "},
		{name: "nothing to serve", url: empty.URL, code: exitUnreachable,
			want: "timestamp.json, http status code: 404; nothing was written (check --tuf-url and the network)"},
		{name: "never answers", url: hanging.URL, args: []string{"--timeout", "1s"}, code: exitUnreachable,
			want: "trusted-root: URL did not answer within 1s (--timeout); nothing was written"},
		{name: "no trusted root listed", target: "other.json", body: []byte("{}"), code: exitError,
			want: "trusted-root: URL: getting info for target \"trusted_root.json\": target trusted_root.json not found; nothing was written"},
	} {
		for _, asJSON := range []bool{false, true} {
			name := tc.name
			if asJSON {
				name += ", -o json"
			}
			t.Run(name, func(t *testing.T) {
				target, body := tc.target, tc.body
				if target == "" {
					target, body = trustedroot.Target, trJSON
				}
				files, rootJSON := tufrepo.New(t, target, body, tc.spec)
				u := tc.url
				if u == "" {
					u = tufrepo.Serve(t, files).URL
				}
				dir := t.TempDir()
				rootFile := filepath.Join(dir, "root.json")
				writeFile(t, rootFile, string(rootJSON))
				out := filepath.Join(dir, "trusted_root.json")
				writeFile(t, out, "old")
				args := append([]string{"trusted-root", "--tuf-url", u, "--tuf-root", rootFile, "--to", out}, tc.args...)
				if asJSON {
					args = append(args, "-o", "json")
				}
				start := time.Now()
				stdout, stderr, code := runCLI(t, args...)
				if took := time.Since(start); took > 30*time.Second {
					t.Errorf("gave up after %s", took)
				}
				want := strings.ReplaceAll(tc.want, "URL", u)
				if code != tc.code || !strings.Contains(stderr, want) || !strings.Contains(stderr, "nothing was written") {
					t.Errorf("exit %d, want %d; stderr %q (want %q)", code, tc.code, stderr, want)
				}
				if asJSON {
					var got struct {
						Written  bool   `json:"written"`
						Reason   string `json:"reason"`
						ExitCode int    `json:"exit_code"`
					}
					if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Written || got.ExitCode != tc.code || !strings.Contains(got.Reason, want) {
						t.Errorf("-o json: %v %+v", err, got)
					}
				} else if stdout != "" {
					t.Errorf("stdout %q", stdout)
				}
				if b, _ := os.ReadFile(out); string(b) != "old" {
					t.Errorf("%s was overwritten: %.60q", out, b)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 2 {
					t.Errorf("left beside the output: %v", entries)
				}
			})
		}
	}

	t.Run("usage", func(t *testing.T) {
		dir := t.TempDir()
		notRoot := filepath.Join(dir, "notroot.json")
		writeFile(t, notRoot, `{"signed":{"_type":"targets"}}`)
		bigRoot := filepath.Join(dir, "bigroot.json")
		writeFile(t, bigRoot, strings.Repeat(" ", trustedroot.MaxTUFRootSize+1))
		files, _ := tufrepo.New(t, trustedroot.Target, trJSON, tufrepo.Spec{RogueRotation: true})
		rogueRoot := filepath.Join(dir, "rogue.json")
		writeFile(t, rogueRoot, string(files["2.root.json"]))
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--tuf-root", notRoot}, "trusted-root: --tuf-root needs --tuf-url, the repository that root.json is for"},
			{[]string{"--tuf-url", "ftp://x", "--tuf-root", notRoot}, `trusted-root: --tuf-url "ftp://x": give an https://, http:// or file:// URL of a TUF repository`},
			{[]string{"--tuf-url", "http://..", "--tuf-root", notRoot}, `trusted-root: --tuf-url "http://..": give the URL of a TUF repository (it also names the repository's cache directory)`},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", notRoot}, "trusted-root: --tuf-root " + notRoot + " is not a TUF root.json ("},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", notRoot}, "): give the root.json of the repository --tuf-url names"},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", bigRoot}, "trusted-root: --tuf-root " + bigRoot + " is over 512 KiB: it is not a TUF root.json"},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", rogueRoot}, "): get the repository's root.json again"},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", filepath.Join(dir, "nope.json")}, "trusted-root: --tuf-root: open " + filepath.Join(dir, "nope.json") + ": no such file"},
			{[]string{"-o", "x.json"}, "use --to x.json"},
			{[]string{"--to", dir}, "is a directory"},
			{[]string{"--to", filepath.Join(dir, "no", "x.json")}, "does not exist"},
			{[]string{"--timeout", "0s"}, "trusted-root: --timeout 0s: give a positive duration, such as 2m"},
		} {
			_, stderr, code := runCLI(t, append([]string{"trusted-root"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, code, stderr, tc.want)
			}
		}
	})
}
