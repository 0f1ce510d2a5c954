package loader

import (
	"archive/zip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/oprov/oprov/pkg/pkghash"
	"github.com/oprov/oprov/pkg/plugin"
)

// memoZip writes a zip holding one file of content and gives its path, digest and h1:.
func memoZip(t *testing.T, dir, content string) (string, digest.Digest, string) {
	t.Helper()
	p := filepath.Join(dir, content+".zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	w, _ := zw.Create("terraform-provider-x")
	w.Write([]byte(content))
	zw.Close()
	f.Close()
	data, _ := os.ReadFile(p)
	h1, err := pkghash.ZipH1(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return p, digest.FromBytes(data), h1
}

// The memo of a far process keeps evidence, never a verdict: an h1: by the zip's digest, judged
// against each request's lock as it comes, so a request whose lock does not record it is refused
// though an earlier one was let through; and another digest is hashed from its own bytes.
func TestRemoteHostZipH1MemoJudgesEachRequest(t *testing.T) {
	dir := t.TempDir()
	a, da, h1a := memoZip(t, dir, "a")
	b, db, h1b := memoZip(t, dir, "b")
	m := &zipH1s{of: map[digest.Digest]string{}}
	ctx := context.Background()
	if err := m.check(ctx, a, da, &plugin.RemoteRequest{H1: []string{h1a}}); err != nil {
		t.Fatalf("a zip its lock records: %v", err)
	}
	if err := m.check(ctx, a, da, &plugin.RemoteRequest{H1: []string{h1b}}); err == nil || !strings.Contains(err.Error(), "is not one the near side's lock records") {
		t.Errorf("a request whose lock records another h1: was let through by the memo: %v", err)
	}
	if err := m.check(ctx, b, db, &plugin.RemoteRequest{H1: []string{h1a}}); err == nil {
		t.Error("another digest was judged by the first zip's h1:")
	}
	if err := m.check(ctx, b, db, &plugin.RemoteRequest{H1: []string{h1b}}); err != nil {
		t.Errorf("the second zip: %v", err)
	}
}
