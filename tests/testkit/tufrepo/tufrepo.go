// Package tufrepo builds small TUF repositories for tests: root, targets, snapshot and timestamp
// metadata signed with keys made in the test, holding one target, served on 127.0.0.1 or written
// as a directory (a file:// mirror).
package tufrepo

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/theupdateframework/go-tuf/v2/metadata"
)

// Spec says how a repository departs from an honest one.
type Spec struct {
	ExpiredTimestamp bool // timestamp.json expired an hour ago
	RogueTimestamp   bool // timestamp.json signed by a key root.json does not list
	RogueRotation    bool // a 2.root.json signed only by a key 1.root.json does not list
}

// New builds a TUF repository (each role with its own ed25519 key, consistent snapshots) whose
// one target is name, holding target. It returns the repository's files by path, as a mirror
// serves them, and its root.json.
func New(t testing.TB, name string, target []byte, spec Spec) (map[string][]byte, []byte) {
	t.Helper()
	expires := time.Now().Add(24 * time.Hour).UTC()
	signers := map[string]signature.Signer{}
	newSigner := func() (ed25519.PublicKey, signature.Signer) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := signature.LoadSigner(priv, crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		return pub, s
	}
	r := metadata.Root(expires)
	for _, role := range []string{metadata.ROOT, metadata.TARGETS, metadata.SNAPSHOT, metadata.TIMESTAMP} {
		pub, s := newSigner()
		key, err := metadata.KeyFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Signed.AddKey(key, role); err != nil {
			t.Fatal(err)
		}
		signers[role] = s
	}
	if spec.RogueTimestamp {
		_, signers[metadata.TIMESTAMP] = newSigner()
	}
	targets := metadata.Targets(expires)
	tf, err := metadata.TargetFile().FromBytes(name, target, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	targets.Signed.Targets[name] = tf
	snapshot := metadata.Snapshot(expires)
	snapshot.Signed.Meta["targets.json"] = metadata.MetaFile(1)
	tsExpires := expires
	if spec.ExpiredTimestamp {
		tsExpires = time.Now().Add(-time.Hour).UTC()
	}
	timestamp := metadata.Timestamp(tsExpires)
	timestamp.Signed.Meta["snapshot.json"] = metadata.MetaFile(1)

	files := map[string][]byte{}
	sum := sha256.Sum256(target)
	files["targets/"+hex.EncodeToString(sum[:])+"."+name] = target
	signed := func(path string, m interface {
		Sign(signature.Signer) (*metadata.Signature, error)
		ToBytes(bool) ([]byte, error)
	}, s signature.Signer) []byte {
		if _, err := m.Sign(s); err != nil {
			t.Fatal(err)
		}
		b, err := m.ToBytes(true)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = b
		return b
	}
	rootJSON := signed("1.root.json", r, signers[metadata.ROOT])
	if spec.RogueRotation {
		next, err := metadata.Root().FromBytes(rootJSON)
		if err != nil {
			t.Fatal(err)
		}
		next.ClearSignatures()
		next.Signed.Version = 2
		_, rogue := newSigner()
		signed("2.root.json", next, rogue)
	}
	signed("1.targets.json", targets, signers[metadata.TARGETS])
	signed("1.snapshot.json", snapshot, signers[metadata.SNAPSHOT])
	signed("timestamp.json", timestamp, signers[metadata.TIMESTAMP])
	return files, rootJSON
}

// TargetPath is where files holds the target (targets/HASH.NAME).
func TargetPath(t testing.TB, files map[string][]byte) string {
	t.Helper()
	for name := range files {
		if strings.HasPrefix(name, "targets/") {
			return name
		}
	}
	t.Fatal("the repository holds no target")
	return ""
}

// Serve serves files on 127.0.0.1, 404 for anything else, until the test ends.
func Serve(t testing.TB, files map[string][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// WriteDir writes files under dir, a mirror to reach as file://dir.
func WriteDir(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
