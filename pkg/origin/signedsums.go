package origin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/cache"
	"github.com/oprov/oprov/pkg/oci/referrers"
	"github.com/oprov/oprov/pkg/providerrelease"
)

// ArtifactTypeChecksums is the artifact type of the referrer that carries an origin release's
// SHA256SUMS, its OpenPGP signature and the signing key, attached to the mirrored index.
const ArtifactTypeChecksums = "application/vnd.oprov.provider-shasums.v1"

// Provenance annotations on that referrer.
const (
	annotationOrigin   = "dev.oprov.origin"          // the origin registry and provider address
	annotationGPGKeyID = "dev.oprov.gpg-key-id"      // the key that signed SHA256SUMS
	mediaTypeSums      = "text/plain"                // SHA256SUMS
	mediaTypeSignature = "application/pgp-signature" // its detached signature
	mediaTypeKeys      = "application/pgp-keys"      // the signing key, ASCII-armored
)

// signedSums is a release's SHA256SUMS after its signature was checked.
type signedSums struct {
	sums        providerrelease.Sums
	data, sig   []byte // SHA256SUMS and its detached signature, as served
	armoredKeys []byte // the keys the origin lists, kept as provenance
	keyID       string // the key that signed
}

// fetchSignedSums fetches the release's SHA256SUMS and signature (one pair for all platforms),
// checks the signature, and checks that SHA256SUMS agrees with the shasum of every download.
func fetchSignedSums(ctx context.Context, origin *Client, downloads []*Download, pinned openpgp.EntityList) (*signedSums, error) {
	sumsURL, sigURL, err := sumsURLs(downloads)
	if err != nil {
		return nil, err
	}
	var sumsBuf, sigBuf bytes.Buffer
	if _, err := origin.Fetch(ctx, sumsURL, &sumsBuf, 1<<20); err != nil {
		return nil, err
	}
	if _, err := origin.Fetch(ctx, sigURL, &sigBuf, 64<<10); err != nil {
		return nil, err
	}
	keyring, armoredKeys, err := signingKeys(downloads, pinned)
	if err != nil {
		return nil, err
	}
	signer, err := openpgp.CheckDetachedSignature(keyring, bytes.NewReader(sumsBuf.Bytes()), bytes.NewReader(sigBuf.Bytes()), nil)
	if err != nil {
		return nil, fmt.Errorf("the SHA256SUMS signature does not verify with the %s: %v (nothing was pushed)", keyringName(pinned), err)
	}
	s := &signedSums{data: sumsBuf.Bytes(), sig: sigBuf.Bytes(), armoredKeys: armoredKeys, keyID: fmt.Sprintf("%016X", signer.PrimaryKey.KeyId)}
	for _, d := range downloads {
		for _, k := range d.SigningKeys.GPGPublicKeys {
			if k.KeyID != "" && !strings.EqualFold(k.KeyID, s.keyID) && !hasKeyID(keyring, k.KeyID) {
				return nil, fmt.Errorf("the origin names signing key %s, but SHA256SUMS was signed by %s (nothing was pushed)", k.KeyID, s.keyID)
			}
		}
	}
	if s.sums, err = providerrelease.ParseSums(bytes.NewReader(s.data)); err != nil {
		return nil, fmt.Errorf("SHA256SUMS: %w", err)
	}
	for _, d := range downloads {
		want, ok := s.sums[d.Filename]
		if !ok {
			return nil, fmt.Errorf("SHA256SUMS does not list %s (nothing was pushed)", d.Filename)
		}
		if !strings.EqualFold(want, d.SHASum) {
			return nil, fmt.Errorf("the origin's shasum for %s (%s) disagrees with its signed SHA256SUMS (%s) (nothing was pushed)", d.Filename, d.SHASum, want)
		}
	}
	return s, nil
}

// sumsURLs gives the SHA256SUMS and signature URLs, which every platform's answer must share.
func sumsURLs(downloads []*Download) (string, string, error) {
	sumsURL, err := downloads[0].Resolve(downloads[0].SHASumsURL)
	if err != nil {
		return "", "", err
	}
	sigURL, err := downloads[0].Resolve(downloads[0].SHASumsSignatureURL)
	if err != nil {
		return "", "", err
	}
	for _, d := range downloads[1:] {
		u1, _ := d.Resolve(d.SHASumsURL)
		u2, _ := d.Resolve(d.SHASumsSignatureURL)
		if u1 != sumsURL || u2 != sigURL {
			return "", "", fmt.Errorf("the origin names different SHA256SUMS files for %s_%s and %s_%s", downloads[0].OS, downloads[0].Arch, d.OS, d.Arch)
		}
	}
	return sumsURL, sigURL, nil
}

// signingKeys builds the keyring to check SHA256SUMS with: the pinned keys when given, else the
// keys the origin lists. It also returns the origin's keys, armored, to keep as provenance.
func signingKeys(downloads []*Download, pinned openpgp.EntityList) (openpgp.EntityList, []byte, error) {
	var armored bytes.Buffer
	var listed openpgp.EntityList
	seen := map[string]bool{}
	for _, d := range downloads {
		for _, k := range d.SigningKeys.GPGPublicKeys {
			if seen[k.ASCIIArmor] {
				continue
			}
			seen[k.ASCIIArmor] = true
			armored.WriteString(strings.TrimSpace(k.ASCIIArmor) + "\n")
			el, err := openpgp.ReadArmoredKeyRing(strings.NewReader(k.ASCIIArmor))
			if err != nil {
				return nil, nil, fmt.Errorf("the origin's signing key %s is not a valid OpenPGP key: %w", k.KeyID, err)
			}
			listed = append(listed, el...)
		}
	}
	if pinned != nil {
		return pinned, armored.Bytes(), nil
	}
	if len(listed) == 0 {
		return nil, nil, errors.New("the origin lists no signing keys, so SHA256SUMS cannot be checked (nothing was pushed)")
	}
	return listed, armored.Bytes(), nil
}

func keyringName(pinned openpgp.EntityList) string {
	if pinned != nil {
		return "pinned signing keys"
	}
	return "origin's signing keys"
}

func hasKeyID(el openpgp.EntityList, id string) bool {
	for _, e := range el {
		if strings.EqualFold(fmt.Sprintf("%016X", e.PrimaryKey.KeyId), id) {
			return true
		}
	}
	return false
}

// evidence is the signed SHA256SUMS, its signature and the signing keys, to attach to a copy.
func (s *signedSums) evidence(addr manifest.ProviderAddress, version string) *cache.Evidence {
	sumsName := providerrelease.SumsName(addr.Type, version)
	return &cache.Evidence{
		ArtifactType: ArtifactTypeChecksums,
		Files: []referrers.AttachFile{
			{Name: sumsName, MediaType: mediaTypeSums, Data: s.data},
			{Name: sumsName + ".sig", MediaType: mediaTypeSignature, Data: s.sig},
			{Name: "signing-keys.asc", MediaType: mediaTypeKeys, Data: s.armoredKeys},
		},
		Annotations: map[string]string{annotationOrigin: "https://" + addr.Hostname.String() + "/" + addr.Namespace + "/" + addr.Type, annotationGPGKeyID: s.keyID},
	}
}
