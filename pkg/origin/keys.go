package origin

import (
	"fmt"
	"os"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// readKeyFile reads armored OpenPGP public keys to pin.
func readKeyFile(path string) (openpgp.EntityList, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	block, err := armor.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not an armored OpenPGP key: %w", path, err)
	}
	el, err := openpgp.ReadKeyRing(block.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return el, nil
}

// ReadKeyFiles reads several files of armored OpenPGP public keys into one list, in order.
func ReadKeyFiles(paths []string) (openpgp.EntityList, error) {
	var out openpgp.EntityList
	for _, p := range paths {
		el, err := readKeyFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, el...)
	}
	return out, nil
}
