package origin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// writeArmoredKey writes a new OpenPGP public key to dir/name and returns its path and entity.
func writeArmoredKey(t *testing.T, dir, name string) (string, *openpgp.Entity) {
	t.Helper()
	e, err := openpgp.NewEntity(name, "", name+"@example.com", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".asc")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := armor.Encode(f, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, e
}

func TestReadKeyFiles(t *testing.T) {
	dir := t.TempDir()
	a, ea := writeArmoredKey(t, dir, "a")
	b, eb := writeArmoredKey(t, dir, "b")
	el, err := ReadKeyFiles([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(el) != 2 || el[0].PrimaryKey.KeyId != ea.PrimaryKey.KeyId || el[1].PrimaryKey.KeyId != eb.PrimaryKey.KeyId {
		t.Fatalf("read %d keys, want a's then b's", len(el))
	}
	if el, err := ReadKeyFiles(nil); el != nil || err != nil {
		t.Errorf("no files: %v, %v; want nothing", el, err)
	}
	bad := filepath.Join(dir, "bad.asc")
	if err := os.WriteFile(bad, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFiles([]string{a, bad}); err == nil || !strings.Contains(err.Error(), bad+" is not an armored OpenPGP key") {
		t.Errorf("a file that is not a key: %v", err)
	}
}
