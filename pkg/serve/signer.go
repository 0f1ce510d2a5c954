package serve

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
)

// Signer is the organisation's OpenPGP key, which signs the SHA256SUMS of every provider version
// the registry (providers.v1) serves: clients check that signature themselves, against the public
// key the download answer carries.
type Signer struct {
	entity *openpgp.Entity
	// KeyID is the primary key's ID as clients print it (16 hexadecimal digits, upper case).
	KeyID string
	// armored is the public key, ASCII-armored, as the download answer gives it.
	armored string
	// fingerprint names the key in cache keys, so that a new key signs afresh.
	fingerprint string
	// Warning, when set, says which clients cannot check this key's signatures.
	Warning string
}

// maxSigningKeyFile bounds the key file read.
const maxSigningKeyFile = 1 << 20

// LoadSigner reads an ASCII-armored OpenPGP secret key (as `gpg --armor --export-secret-keys`
// writes it) that can sign now. A key protected by a passphrase is refused with how to export one
// that is not: serve runs unattended.
func LoadSigner(path string) (*Signer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSigningKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	if len(data) > maxSigningKeyFile {
		return nil, fmt.Errorf("signing key %s is over %d bytes: not an OpenPGP key", path, maxSigningKeyFile)
	}
	el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("signing key %s is not an ASCII-armored OpenPGP key (export one with gpg --armor --export-secret-keys KEYID): %v", path, err)
	}
	if len(el) != 1 {
		return nil, fmt.Errorf("signing key %s holds %d keys: export the one that signs alone (gpg --armor --export-secret-keys KEYID)", path, len(el))
	}
	e := el[0]
	if e.PrivateKey == nil {
		return nil, fmt.Errorf("signing key %s is a public key: serve needs the secret key (gpg --armor --export-secret-keys KEYID)", path)
	}
	key, ok := e.SigningKey(time.Now())
	if !ok {
		return nil, fmt.Errorf("signing key %s has no key that can sign now (expired, revoked, or without the signing capability)", path)
	}
	if key.PrivateKey == nil || key.PrivateKey.Encrypted || e.PrivateKey.Encrypted {
		return nil, fmt.Errorf("signing key %s is protected by a passphrase: serve signs unattended, so give it a key without one (gpg --quick-gen-key --batch --passphrase '' ..., or gpg --passwd KEYID to remove it)", path)
	}
	var pub bytes.Buffer
	w, err := armor.Encode(&pub, openpgp.PublicKeyType, nil)
	if err != nil {
		return nil, err
	}
	if err := e.Serialize(w); err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	sg := &Signer{entity: e, KeyID: fmt.Sprintf("%016X", e.PrimaryKey.KeyId), armored: pub.String() + "\n",
		fingerprint: fmt.Sprintf("%X", e.PrimaryKey.Fingerprint)}
	if !isRSA(e.PrimaryKey.PubKeyAlgo) || !isRSA(key.PublicKey.PubKeyAlgo) {
		sg.Warning = "the signing key is not RSA: OpenTofu checks its signatures, but Terraform (1.5 at least) cannot read it (\"unsupported feature: public key type\"); for Terraform clients make an RSA key (gpg --quick-gen-key NAME rsa4096 sign never)"
	}
	return sg, nil
}

func isRSA(a packet.PublicKeyAlgorithm) bool {
	return a == packet.PubKeyAlgoRSA || a == packet.PubKeyAlgoRSASignOnly
}

// sign makes a detached binary signature over data, as provider releases carry beside their
// SHA256SUMS.
func (s *Signer) sign(data []byte) ([]byte, error) {
	if s == nil {
		return nil, errors.New("no signing key")
	}
	var sig bytes.Buffer
	if err := openpgp.DetachSign(&sig, s.entity, bytes.NewReader(data), nil); err != nil {
		return nil, fmt.Errorf("signing SHA256SUMS: %w", err)
	}
	return sig.Bytes(), nil
}

// PublicKey gives the signing key's public half, ASCII-armored: what clients are given, and what
// an organisation publishes beside the key's ID.
func (s *Signer) PublicKey() string { return s.armored }
