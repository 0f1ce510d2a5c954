package trustedroot_test

import (
	"bytes"
	"context"
	"errors"
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

func virtualTrustedRoot(t *testing.T) []byte {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return sigstoretest.TrustedRoot(t, vs)
}

// failure is err as an *Error of kind and reason, or fails the test.
func failure(t *testing.T, err error, kind trustedroot.Kind, reason trustedroot.Reason) *trustedroot.Error {
	t.Helper()
	var te *trustedroot.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is no *trustedroot.Error", err, err)
	}
	if te.Kind != kind || te.Reason != reason {
		t.Fatalf("kind %q reason %d, want %q %d: %v", te.Kind, te.Reason, kind, reason, err)
	}
	return te
}

// TestFetchThroughTUF: Fetch gives the target TUF vouches for, from a repository on 127.0.0.1
// and from a file:// mirror of it, with what it holds, and keeps TUF's metadata in CacheDir (not
// ~/.sigstore).
func TestFetchThroughTUF(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	trJSON := virtualTrustedRoot(t)
	files, rootJSON := tufrepo.New(t, trustedroot.Target, trJSON, tufrepo.Spec{})
	srv := tufrepo.Serve(t, files)
	mirror := t.TempDir()
	tufrepo.WriteDir(t, mirror, files)
	for _, repo := range []string{srv.URL + "/", "file://" + filepath.ToSlash(mirror)} {
		t.Run(repo[:4], func(t *testing.T) {
			cacheDir := t.TempDir()
			res, err := trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: repo, TUFRoot: rootJSON, CacheDir: cacheDir, Timeout: time.Minute, UserAgent: "oprov/test"})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(res.JSON, trJSON) {
				t.Error("not the target TUF vouches for")
			}
			if res.Repository != strings.TrimSuffix(repo, "/") {
				t.Errorf("repository %q", res.Repository)
			}
			s := res.Summary
			if len(s.CAs) != 1 || s.CAs[0].Start == nil || len(s.TSAs) != 1 || len(s.Logs) != 1 || s.CTLogs == nil {
				t.Errorf("summary %+v", s)
			}
			if entries, _ := os.ReadDir(cacheDir); len(entries) == 0 {
				t.Error("no TUF metadata kept in CacheDir")
			}
			if _, err := os.Stat(filepath.Join(home, ".sigstore")); err == nil {
				t.Error("TUF metadata was kept in ~/.sigstore")
			}
		})
	}
}

// TestFetchRefusesHostileRepositories: metadata signed by a key the root does not list, expired
// metadata, a target that does not match the metadata, metadata or a target over the bounds, and
// a target that is no usable trusted root are each an *Error of Kind Refused.
func TestFetchRefusesHostileRepositories(t *testing.T) {
	trJSON := virtualTrustedRoot(t)
	big := bytes.Repeat([]byte(" "), trustedroot.MaxTrustedRootSize+1)
	copy(big, trJSON)
	for _, tc := range []struct {
		name   string
		target []byte
		spec   tufrepo.Spec
		tamper func(files map[string][]byte)
		reason trustedroot.Reason
		want   string
	}{
		{name: "timestamp signed by a key the root does not list", spec: tufrepo.Spec{RogueTimestamp: true}, reason: trustedroot.RefusedByTUF, want: "timestamp"},
		{name: "a root rotation signed by a key the root does not list", spec: tufrepo.Spec{RogueRotation: true}, reason: trustedroot.RefusedByTUF, want: "Verifying root failed"},
		{name: "expired timestamp", spec: tufrepo.Spec{ExpiredTimestamp: true}, reason: trustedroot.RefusedByTUF, want: "expired"},
		{name: "a target that does not match the metadata", reason: trustedroot.RefusedByTUF, want: "hash verification failed",
			tamper: func(files map[string][]byte) {
				p := tufrepo.TargetPath(t, files)
				b := bytes.Clone(files[p])
				b[len(b)-2] ^= 1
				files[p] = b
			}},
		{name: "a target longer than the metadata says", reason: trustedroot.RefusedByTUF, want: "larger than expected",
			tamper: func(files map[string][]byte) {
				p := tufrepo.TargetPath(t, files)
				files[p] = append(bytes.Clone(files[p]), bytes.Repeat([]byte(" "), 1000)...)
			}},
		{name: "a target over the bound", target: big, reason: trustedroot.RefusedByTUF, want: "over the 4 MiB oprov accepts",
			// Not served: were it asked for, the answer would be 404 (Unreachable), not a refusal.
			tamper: func(files map[string][]byte) { delete(files, tufrepo.TargetPath(t, files)) }},
		{name: "timestamp metadata over go-tuf's bound", reason: trustedroot.RefusedByTUF, want: "larger than expected",
			tamper: func(files map[string][]byte) {
				files["timestamp.json"] = append(bytes.Clone(files["timestamp.json"]), bytes.Repeat([]byte(" "), 64<<10)...)
			}},
		{name: "a signed target that is not a trusted root", target: []byte(`{"mediaType":"text/plain"}`), reason: trustedroot.NotTrustedRoot, want: "it is not a trusted root"},
		{name: "a signed trusted root with no certificate authority", target: []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), reason: trustedroot.NoCertificateAuthority, want: "lists no certificate authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := trJSON
			if tc.target != nil {
				target = tc.target
			}
			files, rootJSON := tufrepo.New(t, trustedroot.Target, target, tc.spec)
			if tc.tamper != nil {
				tc.tamper(files)
			}
			srv := tufrepo.Serve(t, files)
			res, err := trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir(), Timeout: time.Minute})
			if res != nil {
				t.Fatalf("a result: %+v", res.Summary)
			}
			te := failure(t, err, trustedroot.Refused, tc.reason)
			if te.Repository != srv.URL || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q, want %q", err, tc.want)
			}
		})
	}
}

// TestFetchUnreachable: a repository that never answers is Unreachable (TimedOut) within the
// timeout; one that refuses connections or has nothing to serve is Unreachable (NotReached).
func TestFetchUnreachable(t *testing.T) {
	_, rootJSON := tufrepo.New(t, trustedroot.Target, virtualTrustedRoot(t), tufrepo.Spec{})

	t.Run("never answers", func(t *testing.T) {
		hang := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
		t.Cleanup(srv.Close)
		t.Cleanup(func() { close(hang) })
		start := time.Now()
		_, err := trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir(), Timeout: time.Second})
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("gave up after %s, not about 1s", took)
		}
		te := failure(t, err, trustedroot.Unreachable, trustedroot.TimedOut)
		if te.Timeout != time.Second || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer within 1s") {
			t.Errorf("%v (timeout %s)", err, te.Timeout)
		}
	})

	t.Run("refuses connections", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close()
		_, err := trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir(), Timeout: time.Minute})
		failure(t, err, trustedroot.Unreachable, trustedroot.NotReached)
	})

	t.Run("nothing to serve", func(t *testing.T) {
		srv := tufrepo.Serve(t, map[string][]byte{})
		_, err := trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir(), Timeout: time.Minute})
		failure(t, err, trustedroot.Unreachable, trustedroot.NotReached)
	})
}

// TestFetchBadInput: a repository URL Fetch cannot use and a TUF root that is none (too large,
// not a root, not signed by its own keys, empty) are BadInput, found before anything is asked of
// the repository. An empty TUF root is not taken to mean the public-good one.
func TestFetchBadInput(t *testing.T) {
	asked := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked = true; http.NotFound(w, r) }))
	t.Cleanup(srv.Close)
	files, rootJSON := tufrepo.New(t, trustedroot.Target, virtualTrustedRoot(t), tufrepo.Spec{RogueRotation: true})
	for _, tc := range []struct {
		name    string
		repo    string
		tufRoot []byte
		reason  trustedroot.Reason
		want    string
	}{
		{"ftp URL", "ftp://x", rootJSON, trustedroot.BadURL, `"ftp://x": give an https://, http:// or file:// URL`},
		{"http URL with no host", "http:///tuf", rootJSON, trustedroot.BadURL, "give an https://"},
		{"URL naming no cache directory", "http://..", rootJSON, trustedroot.BadURLPath, "give the URL of a TUF repository"},
		{"TUF root over the bound", srv.URL, bytes.Repeat([]byte(" "), trustedroot.MaxTUFRootSize+1), trustedroot.TUFRootTooLarge, "over 512 KiB"},
		{"TUF root that is targets metadata", srv.URL, []byte(`{"signed":{"_type":"targets"}}`), trustedroot.NotTUFRoot, "not a TUF root.json"},
		{"empty TUF root", srv.URL, []byte{}, trustedroot.NotTUFRoot, "not a TUF root.json"},
		{"TUF root signed by another key", srv.URL, files["2.root.json"], trustedroot.TUFRootNotSelfSigned, "not signed by its own root keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: tc.repo, TUFRoot: tc.tufRoot, CacheDir: t.TempDir(), Timeout: time.Minute})
			failure(t, err, trustedroot.BadInput, tc.reason)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q, want %q", err, tc.want)
			}
		})
	}
	if asked {
		t.Error("the repository was asked before the input was checked")
	}
	if _, err := trustedroot.Repository(""); err != nil {
		t.Errorf("the default repository: %v", err)
	}
}

// TestFetchOtherFailures: a cancelled context gives its own error, not a kind; a repository whose
// metadata lists no trusted_root.json is Failed.
func TestFetchOtherFailures(t *testing.T) {
	files, rootJSON := tufrepo.New(t, trustedroot.Target, virtualTrustedRoot(t), tufrepo.Spec{})
	srv := tufrepo.Serve(t, files)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := trustedroot.Fetch(ctx, trustedroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir(), Timeout: time.Minute})
	var te *trustedroot.Error
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Errorf("cancelled: %v (%T)", err, err)
	}

	files, rootJSON = tufrepo.New(t, "other.json", []byte("{}"), tufrepo.Spec{})
	srv = tufrepo.Serve(t, files)
	_, err = trustedroot.Fetch(context.Background(), trustedroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir(), Timeout: time.Minute})
	failure(t, err, trustedroot.Failed, 0)
	if !strings.Contains(err.Error(), "trusted_root.json not found") {
		t.Errorf("%v", err)
	}
}
