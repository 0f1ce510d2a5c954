package bindelta

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// similar gives a base of n random bytes and a target made from it the way a rebuild for another
// CPython changes a binary: bytes changed here and there, a run inserted, a run dropped.
func similar(n int) (base, target []byte) {
	r := rand.New(rand.NewPCG(1, 2))
	base = make([]byte, n)
	for i := range base {
		base[i] = byte(r.IntN(256))
	}
	target = append([]byte{}, base[:n/3]...)
	target = append(target, []byte("an inserted run of new bytes")...)
	target = append(target, base[n/3+100:]...)
	for i := 0; i < len(target); i += 997 {
		target[i] ^= 0x5a
	}
	return base, target
}

func TestRoundTrip(t *testing.T) {
	base, target := similar(1 << 20)
	d, err := Encode(base, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) > len(target)/10 {
		t.Errorf("delta of %d bytes for a %d-byte target that differs in a few places", len(d), len(target))
	}
	again, _ := Encode(base, target)
	if !bytes.Equal(d, again) {
		t.Error("two encodings differ")
	}
	got, err := Apply(base, d, len(target))
	if err != nil || !bytes.Equal(got, target) {
		t.Fatalf("apply: %v (equal %v)", err, bytes.Equal(got, target))
	}
	if _, err := Apply(base, d, len(target)-1); err == nil {
		t.Error("a result past the limit was given")
	}
	for _, tc := range [][2][]byte{{nil, target}, {base, nil}, {nil, nil}, {[]byte("short"), []byte("other")}} {
		d, err := Encode(tc[0], tc[1])
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Apply(tc[0], d, len(tc[1])); err != nil || !bytes.Equal(got, tc[1]) {
			t.Errorf("base %d bytes, target %d: %v", len(tc[0]), len(tc[1]), err)
		}
	}
}

// FuzzApply: whatever a delta holds, Apply gives an error or a result within the limit: it never
// reads outside its inputs or panics.
func FuzzApply(f *testing.F) {
	base, target := similar(4096)
	d, _ := Encode(base, target)
	f.Add(d)
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, delta []byte) {
		out, err := Apply(base, delta, 8192)
		if err == nil && len(out) > 8192 {
			t.Fatalf("%d bytes past the limit", len(out))
		}
	})
}
