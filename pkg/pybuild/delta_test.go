package pybuild

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/oprov/oprov/internal/bindelta"
)

// TestDeltaExtensions: an extension of an older set that is mostly the newest set's build is
// replaced by a delta that rebuilds it, listed in the set's oprov-deltas.json with its module
// name; one unlike its counterpart (not even a binary), a small one, a compiled package __init__
// and the newest set's own stay as they are.
func TestDeltaExtensions(t *testing.T) {
	lib := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return b
	}
	write := func(rel string, data []byte) {
		p := filepath.Join(lib, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// An executable file of this platform's format (this test's own) stands for an extension:
	// deltaExtensions reads its library search paths.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	older := append([]byte{}, base...)
	for i := len(older) / 2; i < len(older); i += 4096 {
		older[i]++
	}
	write("cp313/grpc/_cython/cygrpc.cpython-313-x86_64-linux-gnu.so", base)
	write("cp311/grpc/_cython/cygrpc.cpython-311-x86_64-linux-gnu.so", older)
	write("cp313/other.cpython-313-x86_64-linux-gnu.so", random(400<<10))
	write("cp311/other.cpython-311-x86_64-linux-gnu.so", random(400<<10))
	write("cp313/small.cpython-313-x86_64-linux-gnu.so", base[:1000])
	write("cp311/small.cpython-311-x86_64-linux-gnu.so", older[:1000])
	write("cp313/pkg/__init__.cpython-313-x86_64-linux-gnu.so", base)
	write("cp311/pkg/__init__.cpython-311-x86_64-linux-gnu.so", older)

	if err := deltaExtensions(lib, []string{"3.11", "3.13"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(lib, "cp311", deltasFile))
	if err != nil {
		t.Fatal(err)
	}
	var entries []deltaEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Module != "grpc._cython.cygrpc" || entries[0].Base != "cp313/grpc/_cython/cygrpc.cpython-313-x86_64-linux-gnu.so" || entries[0].Size != int64(len(older)) {
		t.Fatalf("entries %+v, want grpc._cython.cygrpc alone", entries)
	}
	if _, err := os.Stat(filepath.Join(lib, "cp311", entries[0].File)); !os.IsNotExist(err) {
		t.Errorf("the extension stored as a delta is still there (%v)", err)
	}
	delta, err := os.ReadFile(filepath.Join(lib, "cp311", entries[0].File+deltaSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bindelta.Apply(base, delta, len(older)); err != nil || !bytes.Equal(got, older) {
		t.Errorf("the delta does not rebuild the extension: %v", err)
	}
	for _, kept := range []string{"cp311/other.cpython-311-x86_64-linux-gnu.so", "cp311/small.cpython-311-x86_64-linux-gnu.so", "cp313/grpc/_cython/cygrpc.cpython-313-x86_64-linux-gnu.so", "cp311/pkg/__init__.cpython-311-x86_64-linux-gnu.so"} {
		if _, err := os.Stat(filepath.Join(lib, kept)); err != nil {
			t.Errorf("%s: %v", kept, err)
		}
	}
	if _, err := os.Stat(filepath.Join(lib, "cp313", deltasFile)); !os.IsNotExist(err) {
		t.Errorf("the newest set lists deltas (%v)", err)
	}
}

// TestLoadsBeside: this test's own executable loads nothing from beside itself; a file that is
// no binary cannot be read and counts as one that does (it is never stored as a delta).
func TestLoadsBeside(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if loadsBeside(exe) {
		t.Errorf("%s: loads libraries from beside itself, says loadsBeside", exe)
	}
	junk := filepath.Join(t.TempDir(), "junk.so")
	os.WriteFile(junk, []byte("not a binary"), 0o644)
	if !loadsBeside(junk) {
		t.Error("a file that is no binary was taken for one loading nothing beside itself")
	}
}
