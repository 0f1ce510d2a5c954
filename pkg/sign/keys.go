// Package sign signs provider versions and verifies their signatures in the forms the
// sigstore/cosign ecosystem reads: cosign's bundle format stored as an OCI 1.1 referrer (the
// default), and cosign v2's legacy "sha256-<hex>.sig" tag. A trust policy decides which keys may
// sign which providers.
package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/cosign/v2/pkg/cosign/env"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// The PEM block types of cosign's encrypted private keys (cosign writes the first; it reads both).
const (
	sigstoreKeyPEMType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	cosignKeyPEMType   = "ENCRYPTED COSIGN PRIVATE KEY"
)

// PasswordEnv is where a key's password comes from without a prompt, as for cosign.
var PasswordEnv = env.VariablePassword.String()

// PassFunc supplies a key's password; confirm asks for it twice (when creating a key).
type PassFunc func(confirm bool) ([]byte, error)

// EnvPassword reads the password from COSIGN_PASSWORD, falling back to prompt (which may be nil).
func EnvPassword(prompt PassFunc) PassFunc {
	return func(confirm bool) ([]byte, error) {
		if pw, ok := os.LookupEnv(PasswordEnv); ok {
			return []byte(pw), nil
		}
		if prompt == nil {
			return nil, fmt.Errorf("no password: set %s (an empty value means no password) or run on a terminal to be asked", PasswordEnv)
		}
		return prompt(confirm)
	}
}

// Signer is a loaded private key.
type Signer struct {
	signature.SignerVerifier
	Public PublicKey
}

// LoadSigner loads a cosign private key file (an encrypted sigstore key, as cosign
// generate-key-pair and oprov keygen write).
func LoadSigner(path string, pass PassFunc) (*Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	// cosign's key file: PKCS#8 encrypted with securesystemslib's scrypt + secretbox scheme,
	// in a PEM block. The sigstore libraries under cosign do the work; cosign's own package would
	// also link its transparency-log clients, which cost every oprov command start-up time.
	block, _ := pem.Decode(data)
	if block == nil || (block.Type != sigstoreKeyPEMType && block.Type != cosignKeyPEMType) {
		return nil, fmt.Errorf("signing key %s is not a cosign private key (make one with 'oprov keygen' or 'cosign generate-key-pair')", path)
	}
	pw, err := pass(false)
	if err != nil {
		return nil, err
	}
	der, err := encrypted.Decrypt(block.Bytes, pw)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: cannot decrypt it (wrong %s?): %w", path, PasswordEnv, err)
	}
	priv, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	sv, err := signature.LoadDefaultSignerVerifier(priv)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, err
	}
	pk, err := newPublicKey(path, pub)
	if err != nil {
		return nil, err
	}
	return &Signer{SignerVerifier: sv, Public: pk}, nil
}

// PublicKey is a trusted public key with a name to report it by.
type PublicKey struct {
	Name     string // where it came from: a file path or a policy's label
	Key      crypto.PublicKey
	Hint     string // base64 sha256 of the DER key, as sigstore bundles name keys
	verifier signature.Verifier
}

func newPublicKey(name string, pub crypto.PublicKey) (PublicKey, error) {
	der, err := cryptoutils.MarshalPublicKeyToDER(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %s: %w", name, err)
	}
	v, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %s: %w", name, err)
	}
	sum := sha256.Sum256(der)
	return PublicKey{Name: name, Key: pub, Hint: base64.StdEncoding.EncodeToString(sum[:]), verifier: v}, nil
}

// parsePublicKey parses a PEM public key.
func parsePublicKey(name string, pemData []byte) (PublicKey, error) {
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(pemData)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key %s is not a PEM public key (cosign.pub): %w", name, err)
	}
	return newPublicKey(name, pub)
}

// LoadPublicKey reads a PEM public key file (cosign.pub).
func LoadPublicKey(path string) (PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return PublicKey{}, fmt.Errorf("public key: %w", err)
	}
	return parsePublicKey(path, data)
}

// loadPublicKeyFrom loads a public key named in a configuration file: a path relative to that
// file's directory (or absolute), or the PEM key itself. name labels an inline key in messages.
func loadPublicKeyFrom(file, key, name string) (PublicKey, error) {
	if strings.HasPrefix(strings.TrimSpace(key), "-----BEGIN") {
		return parsePublicKey(name, []byte(key))
	}
	if !filepath.IsAbs(key) {
		key = filepath.Join(filepath.Dir(file), key)
	}
	return LoadPublicKey(key)
}

// GenerateKeyPair writes PREFIX.key (encrypted with the password) and PREFIX.pub, the files
// cosign generate-key-pair writes. Existing files are not overwritten.
func GenerateKeyPair(prefix string, pass PassFunc) (keyPath, pubPath string, err error) {
	keyPath, pubPath = prefix+".key", prefix+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Stat(p); err == nil {
			return "", "", fmt.Errorf("%s already exists: move it away or choose another --output-key-prefix", p)
		}
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader) // cosign's default key type
	if err != nil {
		return "", "", err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", err
	}
	pw, err := pass(true)
	if err != nil {
		return "", "", err
	}
	enc, err := encrypted.Encrypt(der, pw)
	if err != nil {
		return "", "", fmt.Errorf("encrypting the key: %w", err)
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return "", "", err
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: sigstoreKeyPEMType, Bytes: enc}), 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pubPath, pubPEM, 0o644); err != nil {
		os.Remove(keyPath)
		return "", "", err
	}
	return keyPath, pubPath, nil
}

// writeNew writes a file that must not exist yet, through a temporary name.
func writeNew(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Link, not rename: it fails rather than replace a file that appeared meanwhile.
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s already exists", path)
		}
		return err
	}
	return nil
}
