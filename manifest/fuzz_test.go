package manifest

import (
	"testing"
)

// FuzzParseIndex: any bytes give an index or an error, never a panic, and an accepted index keeps
// the invariants callers rely on.
func FuzzParseIndex(f *testing.F) {
	b, _ := Build([]Package{pkg("linux", "amd64", "a"), pkg("darwin", "arm64", "b")}, IndexOptions{Created: "2024-01-01T00:00:00Z"})
	f.Add(b.Index.Data)
	f.Add(b.Manifests[0].Data)
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","artifactType":"application/vnd.opentofu.provider","manifests":[]}`))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParseIndexLimit(data, defaultMaxEntries)
		if err != nil {
			return
		}
		if len(ix.Entries) == 0 {
			t.Fatal("accepted an index without provider entries")
		}
		seen := map[Platform]bool{}
		for i, e := range ix.Entries {
			if seen[e.Platform] {
				t.Fatalf("accepted two entries for %s", e.Platform)
			}
			seen[e.Platform] = true
			if e.Descriptor.Digest.Validate() != nil {
				t.Fatalf("accepted an invalid digest %q", e.Descriptor.Digest)
			}
			if i > 0 && e.Platform.Less(ix.Entries[i-1].Platform) {
				t.Fatal("entries not sorted")
			}
		}
	})
}

// FuzzParsePlatformManifest: any bytes give a manifest or an error; an accepted one has exactly one
// zip layer with a valid digest and a title that is a plain file name.
func FuzzParsePlatformManifest(f *testing.F) {
	b, _ := buildPlatformManifest(pkg("linux", "amd64", "a"))
	f.Add(b.Data)
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pm, err := ParsePlatformManifest(data)
		if err != nil {
			return
		}
		if pm.Layer.MediaType != MediaTypeZip || pm.Layer.Digest.Validate() != nil {
			t.Fatalf("accepted layer %+v", pm.Layer)
		}
		for _, c := range pm.Filename {
			if c == '/' || c == '\\' {
				t.Fatalf("accepted title %q", pm.Filename)
			}
		}
	})
}

// FuzzTagToVersion: a tag that parses maps back to itself.
func FuzzTagToVersion(f *testing.F) {
	for _, s := range []string{"1.0.0", "1.2.0_abc", "latest", "1.0.0-rc.1_b.2", "01.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tag string) {
		v, err := TagToVersion(tag)
		if err != nil {
			return
		}
		back, err := VersionToTag(v)
		if err != nil || back != tag {
			t.Fatalf("tag %q -> version %q -> tag %q (%v)", tag, v, back, err)
		}
	})
}

// FuzzConstraints: any constraint string gives a set or an error, never a panic.
func FuzzConstraints(f *testing.F) {
	for _, s := range []string{"~> 1.2", ">= 1.0, < 2.0", "1.0.0", "", "!= 99999999999999999999.0.0", "~>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		Constraints(s)
	})
}
