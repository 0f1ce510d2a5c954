package trustroot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/testing/ca"

	"github.com/oprov/oprov/pkg/sign/trustroot"
	"github.com/oprov/oprov/tests/testkit/tufrepo"
)

func virtualRoot(t *testing.T) []byte {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	return tufrepo.VirtualTrustedRoot(t, vs)
}

// fetch serves files as a TUF repository on 127.0.0.1 and fetches the trusted root from it,
// trusting rootJSON.
func fetch(t *testing.T, files map[string][]byte, rootJSON []byte, timeout time.Duration) ([]byte, error) {
	t.Helper()
	srv := tufrepo.Serve(t, files)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	data, _, err := trustroot.Fetch(ctx, trustroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir()})
	return data, err
}

// An honest repository gives the trusted root it holds, from a server and from a file:// mirror.
func TestFetch(t *testing.T) {
	tr := virtualRoot(t)
	files, rootJSON := tufrepo.New(t, trustroot.Target, tr, tufrepo.Spec{})
	data, err := fetch(t, files, rootJSON, time.Minute)
	if err != nil || !bytes.Equal(data, tr) {
		t.Fatalf("%v: %.80q", err, data)
	}
	dir := t.TempDir()
	tufrepo.WriteDir(t, dir, files)
	data, _, err = trustroot.Fetch(context.Background(), trustroot.Options{Repository: "file://" + filepath.ToSlash(dir), TUFRoot: rootJSON, CacheDir: t.TempDir()})
	if err != nil || !bytes.Equal(data, tr) {
		t.Fatalf("file:// mirror: %v", err)
	}
}

// What a hostile repository serves is refused, each failure of its Kind: TUF's refusals
// (metadata not signed by the root's keys, expired, a target that does not match the metadata or
// is larger than oprov accepts), a signed target that is no usable trusted root, a server that
// never answers (at the deadline) and one that is not there.
func TestFetchRefusesHostileRepositories(t *testing.T) {
	tr := virtualRoot(t)
	big := bytes.Repeat([]byte(" "), trustroot.MaxSize+1)
	copy(big, tr)
	for _, tc := range []struct {
		name   string
		target []byte
		spec   tufrepo.Spec
		tamper func(t *testing.T, files map[string][]byte)
		kind   trustroot.Kind
		want   string
	}{
		{name: "a target that does not match the metadata", kind: trustroot.Refused, want: "hash verification failed",
			tamper: func(t *testing.T, files map[string][]byte) {
				p := tufrepo.TargetPath(t, files)
				b := bytes.Clone(files[p])
				b[len(b)-2] ^= 1
				files[p] = b
			}},
		{name: "a target longer than the metadata says", kind: trustroot.Refused, want: "larger than expected",
			tamper: func(t *testing.T, files map[string][]byte) {
				p := tufrepo.TargetPath(t, files)
				files[p] = append(bytes.Clone(files[p]), bytes.Repeat([]byte(" "), 1000)...)
			}},
		{name: "a target over oprov's bound", target: big, kind: trustroot.Refused, want: "over the 4 MiB oprov accepts",
			// Not served: were it asked for, the answer would be 404 (Unreachable), not a refusal.
			tamper: func(t *testing.T, files map[string][]byte) { delete(files, tufrepo.TargetPath(t, files)) }},
		{name: "timestamp signed by a key the root does not list", spec: tufrepo.Spec{RogueTimestamp: true}, kind: trustroot.Refused, want: "timestamp"},
		{name: "a root rotation signed by a key the root does not list", spec: tufrepo.Spec{RogueRotation: true}, kind: trustroot.Refused, want: "Verifying root failed"},
		{name: "expired timestamp", spec: tufrepo.Spec{ExpiredTimestamp: true}, kind: trustroot.Refused, want: "expired"},
		{name: "a signed target that is not a trusted root", target: []byte(`{"mediaType":"text/plain"}`), kind: trustroot.Unusable, want: "it is not a trusted root"},
		{name: "a signed trusted root with no certificate authority", target: []byte(`{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`), kind: trustroot.Unusable, want: "lists no certificate authority"},
		{name: "a metadata file the server lacks", kind: trustroot.Unreachable, want: "could not fetch",
			tamper: func(t *testing.T, files map[string][]byte) { delete(files, "timestamp.json") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tr
			if tc.target != nil {
				target = tc.target
			}
			files, rootJSON := tufrepo.New(t, trustroot.Target, target, tc.spec)
			if tc.tamper != nil {
				tc.tamper(t, files)
			}
			data, err := fetch(t, files, rootJSON, time.Minute)
			var e *trustroot.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || !strings.Contains(err.Error(), tc.want) || data != nil {
				t.Errorf("got %v (kind %d), want kind %d saying %q; %d bytes", err, trustroot.KindOf(err), tc.kind, tc.want, len(data))
			}
		})
	}

	t.Run("a server that never answers", func(t *testing.T) {
		srv := tufrepo.Hang(t)
		_, rootJSON := tufrepo.New(t, trustroot.Target, tr, tufrepo.Spec{})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := trustroot.Fetch(ctx, trustroot.Options{Repository: srv.URL, TUFRoot: rootJSON, CacheDir: t.TempDir()})
		if trustroot.KindOf(err) != trustroot.TimedOut {
			t.Errorf("got %v, want TimedOut", err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("gave up after %s, not at the deadline", took)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		_, rootJSON := tufrepo.New(t, trustroot.Target, tr, tufrepo.Spec{})
		_, _, err := trustroot.Fetch(context.Background(), trustroot.Options{Repository: "http://127.0.0.1:1", TUFRoot: rootJSON, CacheDir: t.TempDir()})
		if trustroot.KindOf(err) != trustroot.Unreachable {
			t.Errorf("got %v, want Unreachable", err)
		}
	})
}

// A repository URL or a TUF root.json that is not one is BadInput, named.
func TestBadInput(t *testing.T) {
	for _, u := range []string{"ftp://x", "http://", "http://..", "::"} {
		if _, err := trustroot.CheckRepository(u); trustroot.KindOf(err) != trustroot.BadInput {
			t.Errorf("%q: %v", u, err)
		}
	}
	if got, err := trustroot.CheckRepository("https://tuf.example/repo/"); err != nil || got != "https://tuf.example/repo" {
		t.Errorf("%q %v", got, err)
	}
	dir := t.TempDir()
	_, rootJSON := tufrepo.New(t, trustroot.Target, []byte("{}"), tufrepo.Spec{})
	var doc map[string]any
	json.Unmarshal(rootJSON, &doc)
	doc["signatures"] = []any{}
	unsigned, _ := json.Marshal(doc)
	for name, content := range map[string][]byte{
		"targets.json":  []byte(`{"signed":{"_type":"targets"}}`),
		"huge.json":     bytes.Repeat([]byte(" "), trustroot.MaxTUFRootSize+1),
		"unsigned.json": unsigned,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, content, 0o600)
		if _, err := trustroot.ReadTUFRoot(p); trustroot.KindOf(err) != trustroot.BadInput || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := trustroot.ReadTUFRoot(filepath.Join(dir, "nope.json")); trustroot.KindOf(err) != trustroot.BadInput {
		t.Errorf("a missing file: %v", err)
	}
	good := filepath.Join(dir, "root.json")
	os.WriteFile(good, rootJSON, 0o600)
	if _, err := trustroot.ReadTUFRoot(good); err != nil {
		t.Errorf("a good root: %v", err)
	}
}
