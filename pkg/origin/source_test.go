package origin

import (
	"context"
	"io"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testorigin"
)

// readAll reads every package of every version the origin offers through a Source, as a mirror
// does: discovery, the versions list, each download answer, the signed SHA256SUMS and each zip.
func readAll(org *testorigin.Origin, ca *testca.CA) error {
	ctx := context.Background()
	addr, err := manifest.ParseProviderAddress(org.Address())
	if err != nil {
		return err
	}
	src := NewSource(oci.NewClient(oci.Options{CAFile: ca.File}), nil)
	list, err := src.AvailableVersions(ctx, addr)
	if err != nil {
		return err
	}
	for _, v := range list {
		platforms, err := src.Platforms(ctx, addr, v)
		if err != nil {
			return err
		}
		for _, p := range platforms {
			pkg, err := src.PackageFor(ctx, addr, v, p)
			if err != nil {
				return err
			}
			if err := pkg.Fetch(ctx, io.Discard, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestSourceRetries: reading a whole release through the source gets through an origin that
// fails now and then.
func TestSourceRetries(t *testing.T) {
	fastRetries(t)
	org, ca := testOrigin(t)
	org.SetFaults(testorigin.Faults{FailNext: 2, DropNext: 1, TruncateNext: 1})
	if err := readAll(org, ca); err != nil {
		t.Fatal(err)
	}
}
