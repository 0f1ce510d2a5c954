package bundle

import (
	"archive/zip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/artifact"
	"github.com/oprov/oprov/pkg/mirror"
	ociref "github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tfcreds"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/tfcredstest"
)

var streamPlatforms = []string{"linux_amd64", "darwin_arm64"}

func startOrigin(t *testing.T, dist string) (*testorigin.Origin, *testca.CA, manifest.ProviderAddress) {
	t.Helper()
	tfcredstest.Isolate(t, tfcreds.EnvPrefix)
	ca := testca.NewCA(t, t.TempDir())
	org := testorigin.Start(t, ca, dist, "acme", "hello", "1.0.0")
	addr, err := manifest.ParseProviderAddress(org.Address())
	if err != nil {
		t.Fatal(err)
	}
	return org, ca, addr
}

func streamOptions(ca *testca.CA, addr manifest.ProviderAddress) ConfigOptions {
	var ps []manifest.Platform
	for _, s := range streamPlatforms {
		p, _ := manifest.ParsePlatform(s)
		ps = append(ps, p)
	}
	return ConfigOptions{Dir: "cfg", Wants: []Want{{Addr: addr, Constraints: "1.0.0"}}, Platforms: ps,
		Registry: ociref.NewClient(ociref.Options{CAFile: ca.File})}
}

// A streamed origin provider is published into the bundle exactly as 'oprov mirror' publishes
// it (the same index digest), its evidence attached, and load's checks accept the bundle; with
// and without a Content-Length (streamed straight in, or spilled first).
func TestStreamOriginMatchesMirror(t *testing.T) {
	org, ca, addr := startOrigin(t, testorigin.FakeRelease(t, "hello", "1.0.0", streamPlatforms...))
	ctx := context.Background()
	layout := ociref.Ref{Layout: filepath.Join(t.TempDir(), "layout")}
	target, err := ociref.NewClient(ociref.Options{}).Open(ctx, layout, true)
	if err != nil {
		t.Fatal(err)
	}
	opts := streamOptions(ca, addr)
	mirrored, err := mirror.Mirror(ctx, target, mirror.Options{Address: addr, Constraint: "1.0.0", Platforms: opts.Platforms, To: layout, Registry: opts.Registry})
	if err != nil {
		t.Fatal(err)
	}
	for _, chunked := range []bool{false, true} {
		org.SetFaults(testorigin.Faults{NoContentLength: chunked})
		out := filepath.Join(t.TempDir(), "b.tar")
		l, err := SaveConfig(ctx, opts, out)
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		if got := l.Providers[0].Index; got != mirrored[0].IndexDigest {
			t.Errorf("chunked %v: the bundle's index is %s, mirror's %s", chunked, got, mirrored[0].IndexDigest)
		}
		b, err := Open(ctx, out, ociref.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		repo := b.Repo(l.Providers[0].Repository)
		v, err := artifact.ResolveVersion(ctx, repo, ociref.Ref{Reference: "1.0.0"}, ociref.Limits{})
		if err != nil {
			t.Fatalf("chunked %v: %v", chunked, err)
		}
		if !hasOriginEvidence(ctx, repo, v) {
			t.Errorf("chunked %v: the version has no SHA256SUMS evidence", chunked)
		}
		if _, err := b.checkListing(ctx); err != nil {
			t.Errorf("chunked %v: %v", chunked, err)
		}
	}
}

// A zip whose bytes differ from the signed SHA256SUMS, and a signed zip that holds a "../"
// entry, each stop the save and leave no bundle (nor anything else) where it was to go.
func TestStreamOriginRefusals(t *testing.T) {
	evil := evilRelease(t)
	for name, c := range map[string]struct {
		dist   string
		faults testorigin.Faults
		want   string
	}{
		"tampered":         {testorigin.FakeRelease(t, "hello", "1.0.0", streamPlatforms...), testorigin.Faults{TamperZip: true}, "SHA256SUMS"},
		"tampered chunked": {testorigin.FakeRelease(t, "hello", "1.0.0", streamPlatforms...), testorigin.Faults{TamperZip: true, NoContentLength: true}, "SHA256SUMS"},
		"escaping entry":   {evil, testorigin.Faults{}, ".."},
	} {
		t.Run(name, func(t *testing.T) {
			org, ca, addr := startOrigin(t, c.dist)
			org.SetFaults(c.faults)
			dir := t.TempDir()
			out := filepath.Join(dir, "b.tar")
			_, err := SaveConfig(context.Background(), streamOptions(ca, addr), out)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			left, _ := os.ReadDir(dir)
			for _, e := range left {
				if !strings.HasPrefix(e.Name(), ".") {
					t.Errorf("the failed save left %s", e.Name())
				}
			}
		})
	}
}

// evilRelease is hello 1.0.0 whose zips hold the executable and an entry named ../escape, with a
// SHA256SUMS that lists them as they are (the origin signs it).
func evilRelease(t *testing.T) string {
	dir := t.TempDir()
	var sums string
	for _, p := range streamPlatforms {
		name := "terraform-provider-hello_1.0.0_" + p + ".zip"
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		zw := zip.NewWriter(f)
		for _, n := range []string{"terraform-provider-hello_v1.0.0", "../escape"} {
			w, err := zw.Create(n)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("#!/bin/sh\n"))
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		data, _ := os.ReadFile(filepath.Join(dir, name))
		h.Write(data)
		sums += hex.EncodeToString(h.Sum(nil)) + "  " + name + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "terraform-provider-hello_1.0.0_SHA256SUMS"), []byte(sums), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
