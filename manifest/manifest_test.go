package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func pkg(os, arch string, content string) Package {
	return Package{
		Platform: Platform{OS: os, Arch: arch},
		Filename: "terraform-provider-x_1.0.0_" + os + "_" + arch + ".zip",
		Digest:   digest.FromString(content),
		Size:     int64(len(content)),
	}
}

func TestBuildIsDeterministicAndSorted(t *testing.T) {
	a := []Package{pkg("windows", "amd64", "w"), pkg("linux", "amd64", "l"), pkg("darwin", "arm64", "d")}
	b := []Package{a[2], a[0], a[1]}
	ba, err := Build(a, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bb, err := Build(b, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ba.Index.Descriptor.Digest != bb.Index.Descriptor.Digest {
		t.Fatalf("input order changed the index digest: %s vs %s", ba.Index.Descriptor.Digest, bb.Index.Descriptor.Digest)
	}
	ix, err := ParseIndexLimit(ba.Index.Data, defaultMaxEntries)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, p := range ix.Platforms() {
		got = append(got, p.String())
	}
	if strings.Join(got, ",") != "darwin_arm64,linux_amd64,windows_amd64" {
		t.Errorf("platform order %v", got)
	}
	// The created annotation changes the digest only when asked for.
	bc, _ := Build(a, IndexOptions{Created: "2024-01-01T00:00:00Z"})
	if bc.Index.Descriptor.Digest == ba.Index.Descriptor.Digest {
		t.Error("a created annotation did not change the index")
	}
}

func TestBuiltManifestsFollowTheFormat(t *testing.T) {
	b, err := Build([]Package{pkg("linux", "amd64", "zip bytes")}, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var idx map[string]any
	json.Unmarshal(b.Index.Data, &idx)
	if idx["mediaType"] != ocispec.MediaTypeImageIndex || idx["artifactType"] != ArtifactTypeProvider {
		t.Errorf("index: %s", b.Index.Data)
	}
	entry := idx["manifests"].([]any)[0].(map[string]any)
	if entry["artifactType"] != artifactTypeProviderTarget || entry["mediaType"] != ocispec.MediaTypeImageManifest {
		t.Errorf("index entry: %v", entry)
	}
	if p := entry["platform"].(map[string]any); p["os"] != "linux" || p["architecture"] != "amd64" {
		t.Errorf("entry platform: %v", p)
	}
	pm, err := ParsePlatformManifest(b.Manifests[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	if pm.Layer.MediaType != MediaTypeZip || pm.Filename != "terraform-provider-x_1.0.0_linux_amd64.zip" || pm.Layer.Digest != digest.FromString("zip bytes") {
		t.Errorf("layer: %+v", pm)
	}
	var m ocispec.Manifest
	json.Unmarshal(b.Manifests[0].Data, &m)
	if m.Config.MediaType != ocispec.MediaTypeEmptyJSON || m.Config.Digest != digest.FromBytes(EmptyConfigData) {
		t.Errorf("config: %+v", m.Config)
	}
}

func TestBuildRefusesTwoPackagesForOnePlatform(t *testing.T) {
	_, err := Build([]Package{pkg("linux", "amd64", "a"), pkg("linux", "amd64", "b")}, IndexOptions{})
	if err == nil || !strings.Contains(err.Error(), "two packages for platform linux_amd64") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseIndexRefuses(t *testing.T) {
	good, _ := Build([]Package{pkg("linux", "amd64", "a"), pkg("darwin", "arm64", "b")}, IndexOptions{})
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(good.Index.Data, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	entry := func(m map[string]any, i int) map[string]any { return m["manifests"].([]any)[i].(map[string]any) }
	cases := map[string]struct {
		data []byte
		want string
	}{
		"not json":         {[]byte("{"), "not valid JSON"},
		"trailing data":    {append(append([]byte{}, good.Index.Data...), []byte("{}")...), "trailing data"},
		"image manifest":   {good.Manifests[0].Data, "image manifest, not an index"},
		"wrong artifact":   {mutate(func(m map[string]any) { m["artifactType"] = "application/x" }), "not an OpenTofu provider"},
		"schema version":   {mutate(func(m map[string]any) { m["schemaVersion"] = 1 }), "schemaVersion 1"},
		"no platform":      {mutate(func(m map[string]any) { delete(entry(m, 0), "platform") }), "no platform"},
		"os.version":       {mutate(func(m map[string]any) { entry(m, 0)["platform"].(map[string]any)["os.version"] = "10" }), "os.version"},
		"bad digest":       {mutate(func(m map[string]any) { entry(m, 0)["digest"] = "sha256:zz" }), "digest"},
		"wrong media type": {mutate(func(m map[string]any) { entry(m, 0)["mediaType"] = ocispec.MediaTypeImageIndex }), "mediaType"},
		"ambiguous": {mutate(func(m map[string]any) {
			entry(m, 1)["platform"] = entry(m, 0)["platform"]
		}), "ambiguous"},
		"no provider entries": {mutate(func(m map[string]any) {
			entry(m, 0)["artifactType"] = "application/spdx+json"
			entry(m, 1)["artifactType"] = "application/spdx+json"
		}), "no application/vnd.opentofu.provider-target entries"},
		"too large": {make([]byte, MaxManifestSize+1), "over the"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIndexLimit(tc.data, defaultMaxEntries)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Other entries (SBOMs) are kept aside, not refused.
	withSBOM := mutate(func(m map[string]any) {
		m["manifests"] = append(m["manifests"].([]any), map[string]any{
			"mediaType": ocispec.MediaTypeImageManifest, "artifactType": "application/spdx+json",
			"digest": digest.FromString("sbom").String(), "size": 4,
		})
	})
	ix, err := ParseIndexLimit(withSBOM, defaultMaxEntries)
	if err != nil || len(ix.Others) != 1 || len(ix.Entries) != 2 {
		t.Fatalf("index with an SBOM entry: %v %+v", err, ix)
	}
}

func TestParsePlatformManifestRefuses(t *testing.T) {
	good, _ := buildPlatformManifest(pkg("linux", "amd64", "a"))
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		json.Unmarshal(good.Data, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	layer := map[string]any{"mediaType": MediaTypeZip, "digest": digest.FromString("b").String(), "size": 1}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"two zips":       {mutate(func(m map[string]any) { m["layers"] = append(m["layers"].([]any), layer) }), "2 archive/zip layers"},
		"no zip":         {mutate(func(m map[string]any) { m["layers"] = []any{} }), "no archive/zip layer"},
		"wrong artifact": {mutate(func(m map[string]any) { m["artifactType"] = "x" }), "artifactType"},
		"title path": {mutate(func(m map[string]any) {
			m["layers"].([]any)[0].(map[string]any)["annotations"] = map[string]any{AnnotationTitle: "../evil.zip"}
		}), "not a plain file name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParsePlatformManifest(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestVersionTags(t *testing.T) {
	for v, tag := range map[string]string{"1.2.0": "1.2.0", "1.2.0+abc": "1.2.0_abc", "1.0.0-rc.1+b.2": "1.0.0-rc.1_b.2"} {
		got, err := VersionToTag(v)
		if err != nil || got != tag {
			t.Errorf("VersionToTag(%q) = %q, %v; want %q", v, got, err, tag)
		}
		back, err := TagToVersion(tag)
		if err != nil || back != v {
			t.Errorf("TagToVersion(%q) = %q, %v; want %q", tag, back, err, v)
		}
	}
	for _, bad := range []string{"latest", "linux_amd64", "sha256-abc", "v1.0.0", "1.0", "1.0.0+x"} {
		if _, err := TagToVersion(bad); err == nil {
			t.Errorf("TagToVersion(%q) accepted a tag that is not a version", bad)
		}
	}
	tv := VersionTags([]string{"1.0.0", "latest", "2.0.0-rc.1", "1.10.0", "1.9.0", "sha256-abc.sig"})
	var got []string
	for _, x := range tv {
		got = append(got, x.Tag)
	}
	if strings.Join(got, ",") != "2.0.0-rc.1,1.10.0,1.9.0,1.0.0" {
		t.Errorf("VersionTags order: %v", got)
	}
}

func TestParsePlatform(t *testing.T) {
	for in, want := range map[string]Platform{"linux_amd64": {"linux", "amd64"}, "darwin/arm64": {"darwin", "arm64"}} {
		got, err := ParsePlatform(in)
		if err != nil || got != want {
			t.Errorf("ParsePlatform(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"linux", "linux_", "_amd64", "Linux_amd64", "linux/amd64/v8", "linux_amd_64"} {
		if _, err := ParsePlatform(bad); err == nil {
			t.Errorf("ParsePlatform(%q) accepted it", bad)
		}
	}
}

// TestParseIndexLimit: an index with more entries than allowed is refused as such, before its
// entries are looked at; at the limit it parses.
func TestParseIndexLimit(t *testing.T) {
	b, err := Build([]Package{pkg("linux", "amd64", "a"), pkg("darwin", "arm64", "b"), pkg("windows", "amd64", "c")}, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseIndexLimit(b.Index.Data, 3); err != nil {
		t.Errorf("3 entries with a limit of 3: %v", err)
	}
	_, err = ParseIndexLimit(b.Index.Data, 2)
	var tooMany *TooManyEntriesError
	if !errors.As(err, &tooMany) || tooMany.N != 3 || tooMany.Max != 2 {
		t.Errorf("3 entries with a limit of 2: %v", err)
	}
}

// TestIndexRecordsH1: Build records each package's h1: on its index entry, ParseIndex reads it
// back, and an annotation that is not an h1: hash is read as none.
func TestIndexRecordsH1(t *testing.T) {
	a, b := pkg("linux", "amd64", "a"), pkg("darwin", "arm64", "b")
	a.H1 = "h1:" + strings.Repeat("A", 43) + "="
	built, err := Build([]Package{a, b}, IndexOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ix, err := ParseIndexLimit(built.Index.Data, defaultMaxEntries)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := ix.Lookup(a.Platform); e.H1 != a.H1 {
		t.Errorf("linux_amd64 h1 = %q, want %q", e.H1, a.H1)
	}
	if e, _ := ix.Lookup(b.Platform); e.H1 != "" {
		t.Errorf("darwin_arm64 has no h1 but parsed %q", e.H1)
	}
	bad := strings.Replace(string(built.Index.Data), a.H1, "h1:not-a-hash", 1)
	if ix, err = ParseIndexLimit([]byte(bad), defaultMaxEntries); err != nil {
		t.Fatal(err)
	}
	if e, _ := ix.Lookup(a.Platform); e.H1 != "" {
		t.Errorf("a malformed h1 annotation was read as %q", e.H1)
	}
	a.H1 = "h1:nope"
	if _, err := Build([]Package{a}, IndexOptions{}); err == nil {
		t.Error("Build recorded a malformed h1")
	}
}
