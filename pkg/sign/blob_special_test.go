//go:build linux

package sign

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestVerifyBlobRefusesSpecialFiles: a FIFO, a device (/dev/zero, also through a symlink) given
// as the file or as the bundle is refused at once as not a regular file (a bad argument), rather
// than waiting for a writer that never comes or hashing without end.
func TestVerifyBlobRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "SHA256SUMS")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	s, pub := testKeys(t, "good")
	data := []byte("checksums\n")
	bundle := signBlob(t, s, data, "")
	bundleFile := writeTestFile(t, dir, "b.bundle", bundle)
	file := writeTestFile(t, dir, "file", data)
	opts := BlobOptions{Keys: []PublicKey{pub}}

	within := func(what string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Errorf("%s: no answer after 10s", what)
			return nil
		}
	}
	for _, c := range []struct{ what, path string }{{"a FIFO", fifo}, {"/dev/zero", "/dev/zero"}, {"a symlink to /dev/zero", zero}} {
		err := within(c.what+" as the file", func() error { _, err := VerifyBlob(c.path, bundleFile, bundle, opts); return err })
		if err != nil && (!errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file")) {
			t.Errorf("%s as the file: %v, want a bad argument naming it not a regular file", c.what, err)
		}
		err = within(c.what+" as the bundle", func() error { _, err := ReadBlobBundle(c.path); return err })
		if err == nil || !errors.Is(err, fs.ErrInvalid) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s as the bundle: %v, want a bad argument naming it not a regular file", c.what, err)
		}
	}
	// Control: a regular file and bundle still verify.
	if _, err := VerifyBlob(file, bundleFile, bundle, opts); err != nil {
		t.Errorf("a regular file: %v", err)
	}
	// Unblock the FIFO's opens left waiting by the code before the fix, so the test can end.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}
