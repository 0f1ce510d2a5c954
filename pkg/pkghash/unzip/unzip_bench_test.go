package unzip

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// benchZip writes a zip of files entries of size bytes each, spread over nested directories.
func benchZip(b *testing.B, files, size int) string {
	b.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	data := make([]byte, size)
	rand.New(rand.NewSource(1)).Read(data)
	for i := 0; i < files; i++ {
		w, err := zw.Create(fmt.Sprintf("d%d/e%d/f%d", i%7, i%13, i))
		if err != nil {
			b.Fatal(err)
		}
		w.Write(data)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "b.zip")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkExtract unpacks a provider-like package (one large executable and a few small files)
// and a package of many small files in nested directories, where per-component work shows most.
func BenchmarkExtract(b *testing.B) {
	for _, c := range []struct {
		name        string
		files, size int
	}{{"provider", 1, 32 << 20}, {"many-small", 300, 512}} {
		b.Run(c.name, func(b *testing.B) {
			zipPath := benchZip(b, c.files, c.size)
			parent := b.TempDir()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dest := filepath.Join(parent, fmt.Sprint(i))
				if err := extract(context.Background(), zipPath, dest, DefaultLimits, nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(dest)
				b.StartTimer()
			}
		})
	}
}
