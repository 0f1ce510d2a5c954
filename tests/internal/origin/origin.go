// Package origin serves a Provider Registry Protocol v1 origin over TLS on 127.0.0.1 for tests:
// discovery, versions, download metadata and the files, from release zips signed with a test
// OpenPGP key. Faults can be switched on to prove that what consumes it checks what it should.
package origin

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/oprov/oprov/tests/internal/testreg"
)

// Faults make the origin misbehave.
type Faults struct {
	BadSignature bool // serve a signature that does not match SHA256SUMS
	TamperZip    bool // serve zips whose bytes differ from SHA256SUMS
	SwapKey      bool // list another key than the one that signed SHA256SUMS
}

// Origin is a running test origin.
type Origin struct {
	Host      string // localhost:PORT
	Namespace string
	Type      string
	Version   string
	Key       *openpgp.Entity
	mu        sync.Mutex
	faults    Faults
	files     map[string][]byte // file name -> content
	platforms []string
	srv       *httptest.Server
	other     *openpgp.Entity
	armored   map[*openpgp.Entity]string
}

// SetFaults changes how the origin misbehaves from now on.
func (o *Origin) SetFaults(f Faults) {
	o.mu.Lock()
	o.faults = f
	o.mu.Unlock()
}

// NewKey makes an OpenPGP key for signing releases.
func NewKey(t testing.TB, name string) *openpgp.Entity {
	t.Helper()
	e, err := openpgp.NewEntity(name, "test", name+"@example.com", &packet.Config{RSABits: 2048})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Armor gives an entity's public key, ASCII-armored.
func Armor(t testing.TB, e *openpgp.Entity) string {
	t.Helper()
	var b bytes.Buffer
	w, err := armor.Encode(&b, openpgp.PublicKeyType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.String()
}

// KeyID is an entity's key ID as the protocol writes it.
func KeyID(e *openpgp.Entity) string { return fmt.Sprintf("%016X", e.PrimaryKey.KeyId) }

// Start serves the release in dist (zips of NAMESPACE/TYPE VERSION and their SHA256SUMS) with a
// certificate from ca for localhost and 127.0.0.1.
func Start(t testing.TB, ca *testreg.CA, dist, namespace, typ, version string) *Origin {
	t.Helper()
	o := &Origin{Namespace: namespace, Type: typ, Version: version, files: map[string][]byte{},
		Key: NewKey(t, "oprov origin"), other: NewKey(t, "someone else")}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	prefix := "terraform-provider-" + typ + "_" + version + "_"
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		o.files[e.Name()] = data
		if p, ok := strings.CutPrefix(e.Name(), prefix); ok && strings.HasSuffix(p, ".zip") {
			o.platforms = append(o.platforms, strings.TrimSuffix(p, ".zip"))
		}
	}
	sums := o.files[prefix+"SHA256SUMS"]
	if sums == nil {
		t.Fatalf("%s has no %sSHA256SUMS", dist, prefix)
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, o.Key, bytes.NewReader(sums), nil); err != nil {
		t.Fatal(err)
	}
	o.files[prefix+"SHA256SUMS.sig"] = sig.Bytes()
	o.armored = map[*openpgp.Entity]string{o.Key: Armor(t, o.Key), o.other: Armor(t, o.other)}

	dir := t.TempDir()
	certFile, keyFile := ca.Issue(t, dir, "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(o.serve))
	o.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	o.srv.StartTLS()
	t.Cleanup(o.srv.Close)
	o.Host = strings.Replace(strings.TrimPrefix(o.srv.URL, "https://"), "127.0.0.1", "localhost", 1)
	return o
}

// Address is the provider's source address on this origin.
func (o *Origin) Address() string { return o.Host + "/" + o.Namespace + "/" + o.Type }

func (o *Origin) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	f := o.faults
	o.mu.Unlock()
	base := "/v1/providers/" + o.Namespace + "/" + o.Type + "/"
	prefix := "terraform-provider-" + o.Type + "_" + o.Version + "_"
	writeJSON := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.URL.Path == "/.well-known/terraform.json":
		writeJSON(map[string]string{"providers.v1": "/v1/providers/"})
	case r.URL.Path == base+"versions":
		var ps []map[string]string
		for _, p := range o.platforms {
			os, arch, _ := strings.Cut(p, "_")
			ps = append(ps, map[string]string{"os": os, "arch": arch})
		}
		writeJSON(map[string]any{"versions": []any{map[string]any{"version": o.Version, "protocols": []string{"5.0", "6.0"}, "platforms": ps}}})
	case strings.HasPrefix(r.URL.Path, base+o.Version+"/download/"):
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, base+o.Version+"/download/"), "/")
		if len(parts) != 2 {
			http.NotFound(w, r)
			return
		}
		name := prefix + parts[0] + "_" + parts[1] + ".zip"
		if _, ok := o.files[name]; !ok {
			http.NotFound(w, r)
			return
		}
		key := o.Key
		if f.SwapKey {
			key = o.other
		}
		writeJSON(map[string]any{
			"protocols": []string{"5.0", "6.0"}, "os": parts[0], "arch": parts[1], "filename": name,
			"download_url":          "/files/" + name, // relative: resolved against this answer's URL
			"shasums_url":           "/files/" + prefix + "SHA256SUMS",
			"shasums_signature_url": "/files/" + prefix + "SHA256SUMS.sig",
			"shasum":                sumOf(o.files[prefix+"SHA256SUMS"], name),
			"signing_keys": map[string]any{"gpg_public_keys": []any{map[string]string{
				"key_id": KeyID(key), "ascii_armor": o.armored[key],
			}}},
		})
	case strings.HasPrefix(r.URL.Path, "/files/"):
		name := strings.TrimPrefix(r.URL.Path, "/files/")
		data, ok := o.files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		switch {
		case f.BadSignature && strings.HasSuffix(name, ".sig"):
			data = append([]byte{}, data...)
			data[len(data)-1] ^= 0xff
		case f.TamperZip && strings.HasSuffix(name, ".zip"):
			data = append(append([]byte{}, data...), []byte("tampered")...)
		}
		w.Write(data)
	default:
		http.NotFound(w, r)
	}
}

func sumOf(sums []byte, name string) string {
	for _, line := range strings.Split(string(sums), "\n") {
		if h, n, ok := strings.Cut(line, "  "); ok && n == name {
			return h
		}
	}
	return ""
}

// nilT lets Armor be used where no test is at hand (the key was made by the test already).
type nilT struct{ testing.TB }

func (nilT) Helper()           {}
func (nilT) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
