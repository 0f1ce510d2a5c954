package loader

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/oprov/oprov/loader/config"
	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/recording"
)

// recordingOf is a recording of example.com/acme/hello at version, with no calls.
func recordingOf(t *testing.T, version string) *recording.Recording {
	t.Helper()
	// The smallest schema answer: protocol 6, an empty provider block.
	text := `{"oprov_recording":2,"program":"tofu 1.12.0"}
{"provider":"example.com/acme/hello","version":"` + version + `","protocol":6,"schema":{"provider":{"version":0,"block":{"description_kind":"plain"}}},"schema_wire":"CgISAA=="}
`
	rec, err := recording.Read(strings.NewReader(text), "rec.jsonl", recording.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A recording of a provider version the configuration's required_providers rule out is refused
// before tofu runs, naming the recorded version and the constraint: tofu checks no version of a
// provider handed to it, so replay would answer for a release the configuration does not allow.
func TestReplayRefusesVersionOutsideConstraint(t *testing.T) {
	addr, err := manifest.ParseProviderAddress("example.com/acme/hello")
	if err != nil {
		t.Fatal(err)
	}
	req := &config.Requirement{Addr: addr, Constraints: []string{"~> 2.0"}, Where: []hcl.Range{{Filename: "main.tf", Start: hcl.Pos{Line: 5}}}}
	for _, p := range []*Project{{Unmanaged: []*config.Requirement{req}}, {Managed: []*Provider{{Req: req}}}} {
		err := p.checkRecordedVersions(recordingOf(t, "1.0.0"), "rec.jsonl")
		if err == nil || !strings.Contains(err.Error(), `version "1.0.0"`) || !strings.Contains(err.Error(), `"~> 2.0"`) || !strings.Contains(err.Error(), "main.tf:5") {
			t.Errorf("version 1.0.0 against ~> 2.0: %v", err)
		}
		if err := p.checkRecordedVersions(recordingOf(t, "2.3.1"), "rec.jsonl"); err != nil {
			t.Errorf("version 2.3.1 against ~> 2.0: %v", err)
		}
		if err := p.checkRecordedVersions(recordingOf(t, "not-a-version"), "rec.jsonl"); err == nil {
			t.Errorf("a version that does not parse was allowed")
		}
	}
	// No constraint allows any version; a provider kept as source has no release to check.
	free := &config.Requirement{Addr: addr}
	if err := (&Project{Unmanaged: []*config.Requirement{free}}).checkRecordedVersions(recordingOf(t, "0.1.0"), "rec.jsonl"); err != nil {
		t.Errorf("no constraint: %v", err)
	}
	if err := (&Project{Local: []*Provider{{Req: req}}}).checkRecordedVersions(recordingOf(t, "0.0.0-dev"), "rec.jsonl"); err != nil {
		t.Errorf("a provider kept as source: %v", err)
	}
}
