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

	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/oprov/oprov/tests/testkit/sigstoretest"
	"github.com/oprov/oprov/tests/testkit/tufrepo"
)

// virtualTrustedRoot is the trusted_root.json of sigstore-go's virtual Sigstore vs (its CA, TSA
// and Rekor log), as a Sigstore instance publishes it in TUF.
func virtualTrustedRoot(t *testing.T, vs *ca.VirtualSigstore) []byte {
	t.Helper()
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), nil, vs.TimestampingAuthorities(), vs.RekorLogs())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTrustedRootThroughTUF: trusted-root fetches trusted_root.json through TUF from a
// repository on 127.0.0.1 (and from a file:// mirror of it), checked against the --tuf-root
// given, writes it, says what it holds (text and -o json), keeps TUF's cache in oprov's cache
// directory; verify-blob then verifies a keyless signature of that Sigstore with it.
func TestTrustedRootThroughTUF(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cacheDir := t.TempDir()
	t.Setenv("OPROV_CACHE_DIR", cacheDir)
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	trJSON := virtualTrustedRoot(t, vs)
	files, rootJSON := tufrepo.New(t, trustedRootTarget, trJSON, tufrepo.Spec{})
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
	for _, want := range []string{"Wrote " + out + ", the trusted root from " + srv.URL, "certificate authorities: 1", "timestamp authorities: 1", "transparency logs: 1", "valid "} {
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
		if got.File != out || len(got.CAs) != 1 || got.CAs[0].Start == nil || len(got.TSAs) != 1 || len(got.Logs) != 1 {
			t.Errorf("summary: %+v", got)
		}
		if b, _ := os.ReadFile(out); !bytes.Equal(b, trJSON) {
			t.Errorf("%s is not the target", out)
		}
	})
}

// TestTrustedRootRefusesHostileMirrors: a target that does not match the targets metadata,
// metadata signed by a key the root does not list, expired timestamp metadata, a target larger
// than the metadata says or than oprov accepts, and a mirror that never answers are refused with
// a clear error and the right exit code, and nothing is written (a file already there is kept).
func TestTrustedRootRefusesHostileMirrors(t *testing.T) {
	t.Setenv("OPROV_CACHE_DIR", t.TempDir())
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	trJSON := virtualTrustedRoot(t, vs)
	big := bytes.Repeat([]byte(" "), maxTrustedRootSize+1)
	copy(big, trJSON)

	for _, tc := range []struct {
		name   string
		target []byte
		spec   tufrepo.Spec
		tamper func(files map[string][]byte)
		code   int
		want   string
	}{
		{name: "a target that does not match the metadata", code: exitRefused, want: "hash verification failed",
			tamper: func(files map[string][]byte) {
				p := tufrepo.TargetPath(t, files)
				b := bytes.Clone(files[p])
				b[len(b)-2] ^= 1
				files[p] = b
			}},
		{name: "a target longer than the metadata says", code: exitRefused, want: "larger than expected",
			tamper: func(files map[string][]byte) {
				p := tufrepo.TargetPath(t, files)
				files[p] = append(bytes.Clone(files[p]), bytes.Repeat([]byte(" "), 1000)...)
			}},
		{name: "a target over oprov's bound", target: big, code: exitRefused, want: "over the 4 MiB oprov accepts",
			// Not served: were it asked for, the answer would be 404 (exit 3), not a refusal.
			tamper: func(files map[string][]byte) { delete(files, tufrepo.TargetPath(t, files)) }},
		{name: "a signed target that is not a trusted root", target: []byte(`{"mediaType":"text/plain"}`), code: exitRefused, want: "it is not a trusted root"},
		{name: "a signed trusted root with no certificate authority", target: []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), code: exitRefused, want: "lists no certificate authority"},
		{name: "timestamp signed by a key the root does not list", spec: tufrepo.Spec{RogueTimestamp: true}, code: exitRefused, want: "timestamp"},
		{name: "a root rotation signed by a key the root does not list", spec: tufrepo.Spec{RogueRotation: true}, code: exitRefused, want: "Verifying root failed"},
		{name: "expired timestamp", spec: tufrepo.Spec{ExpiredTimestamp: true}, code: exitRefused, want: "expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPROV_CACHE_DIR", t.TempDir())
			target := trJSON
			if tc.target != nil {
				target = tc.target
			}
			files, rootJSON := tufrepo.New(t, trustedRootTarget, target, tc.spec)
			if tc.tamper != nil {
				tc.tamper(files)
			}
			srv := tufrepo.Serve(t, files)
			dir := t.TempDir()
			rootFile := filepath.Join(dir, "root.json")
			writeFile(t, rootFile, string(rootJSON))
			out := filepath.Join(dir, "trusted_root.json")
			writeFile(t, out, "old")
			stdout, stderr, code := runCLI(t, "trusted-root", "--tuf-url", srv.URL, "--tuf-root", rootFile, "--to", out)
			if code != tc.code || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "nothing was written") {
				t.Errorf("exit %d, want %d; stderr %q (want %q)\n%s", code, tc.code, stderr, tc.want, stdout)
			}
			if b, _ := os.ReadFile(out); string(b) != "old" {
				t.Errorf("%s was overwritten: %.60q", out, b)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 2 {
				t.Errorf("left beside the output: %v", entries)
			}
		})
	}

	t.Run("control characters in a URI", func(t *testing.T) {
		var doc map[string]any
		if err := json.Unmarshal(trJSON, &doc); err != nil {
			t.Fatal(err)
		}
		doc["certificateAuthorities"].([]any)[0].(map[string]any)["uri"] = "https://fulcio.example\x1b]0;pwned\x07"
		target, _ := json.Marshal(doc)
		files, rootJSON := tufrepo.New(t, trustedRootTarget, target, tufrepo.Spec{})
		srv := tufrepo.Serve(t, files)
		dir := t.TempDir()
		rootFile := filepath.Join(dir, "root.json")
		writeFile(t, rootFile, string(rootJSON))
		stdout, stderr, code := runCLI(t, "trusted-root", "--tuf-url", srv.URL, "--tuf-root", rootFile, "--to", filepath.Join(dir, "tr.json"))
		if code != 0 || strings.ContainsAny(stdout, "\x1b\x07") || !strings.Contains(stdout, `"https://fulcio.example\x1b]0;pwned\a"`) {
			t.Errorf("exit %d: %q %s", code, stdout, stderr)
		}
	})

	t.Run("a mirror that never answers", func(t *testing.T) {
		hang := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(hang) })
		_, rootJSON := tufrepo.New(t, trustedRootTarget, trJSON, tufrepo.Spec{})
		dir := t.TempDir()
		rootFile := filepath.Join(dir, "root.json")
		writeFile(t, rootFile, string(rootJSON))
		out := filepath.Join(dir, "trusted_root.json")
		start := time.Now()
		stdout, stderr, code := runCLI(t, "trusted-root", "--tuf-url", srv.URL, "--tuf-root", rootFile, "--to", out, "--timeout", "1s", "-o", "json")
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("gave up after %s, not about 1s", took)
		}
		var got struct {
			Written  bool   `json:"written"`
			Reason   string `json:"reason"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != exitUnreachable || got.ExitCode != exitUnreachable || got.Written || !strings.Contains(got.Reason, "did not answer within 1s") {
			t.Errorf("exit %d, %v: %s%s", code, err, stdout, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s was written", out)
		}
	})

	t.Run("usage", func(t *testing.T) {
		dir := t.TempDir()
		notRoot := filepath.Join(dir, "notroot.json")
		writeFile(t, notRoot, `{"signed":{"_type":"targets"}}`)
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--tuf-root", notRoot}, "--tuf-root needs --tuf-url"},
			{[]string{"--tuf-url", "ftp://x", "--tuf-root", notRoot}, "give an https://, http:// or file:// URL"},
			{[]string{"--tuf-url", "http://..", "--tuf-root", notRoot}, "give the URL of a TUF repository"},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", notRoot}, "is not a TUF root.json"},
			{[]string{"--tuf-url", "http://127.0.0.1:1", "--tuf-root", filepath.Join(dir, "nope.json")}, "no such file"},
			{[]string{"-o", "x.json"}, "use --to x.json"},
			{[]string{"--to", dir}, "is a directory"},
			{[]string{"--to", filepath.Join(dir, "no", "x.json")}, "does not exist"},
		} {
			_, stderr, code := runCLI(t, append([]string{"trusted-root"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("%v: exit %d, stderr %q (want %q)", tc.args, code, stderr, tc.want)
			}
		}
	})
}
