// Package sign signs provider versions and verifies their signatures in the forms the
// sigstore/cosign ecosystem reads: cosign's bundle format stored as an OCI 1.1 referrer (the
// default), and cosign v2's legacy "sha256-<hex>.sig" tag. A trust policy decides which keys may
// sign which providers.
package sign

import (
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// PasswordEnv is where a key's password comes from without a prompt, as for cosign.
const PasswordEnv = "COSIGN_PASSWORD"

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
	if !strings.Contains(string(data), "ENCRYPTED SIGSTORE PRIVATE KEY") && !strings.Contains(string(data), "ENCRYPTED COSIGN PRIVATE KEY") {
		return nil, fmt.Errorf("signing key %s is not a cosign private key (make one with 'oprov keygen' or 'cosign generate-key-pair')", path)
	}
	pw, err := pass(false)
	if err != nil {
		return nil, err
	}
	sv, err := cosign.LoadPrivateKey(data, pw, nil)
	if err != nil {
		return nil, fmt.Errorf("signing key %s: cannot decrypt it (wrong %s?): %w", path, PasswordEnv, err)
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

// ParsePublicKey parses a PEM public key.
func ParsePublicKey(name string, pemData []byte) (PublicKey, error) {
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
	return ParsePublicKey(path, data)
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
	kb, err := cosign.GenerateKeyPair(cosign.PassFunc(pass))
	if err != nil {
		return "", "", fmt.Errorf("generating a key pair: %w", err)
	}
	if err := writeNew(keyPath, kb.PrivateBytes, 0o600); err != nil {
		return "", "", err
	}
	if err := writeNew(pubPath, kb.PublicBytes, 0o644); err != nil {
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
