package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAttachDiscoverLayout(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	sbom := filepath.Join(t.TempDir(), "sbom.spdx.json")
	if err := os.WriteFile(sbom, []byte(`{"spdxVersion":"SPDX-2.3"}`), 0o644); err != nil {
		t.Fatal(err)
	}

	ios, out, _ := testIO()
	if err := runDiscover(ctx, &discoverOptions{io: ios, Ref: repo + ":1.0.0", Depth: 2, output: textOut}); err != nil {
		t.Fatal(err)
	}
	if want := repo + ":1.0.0 (" + digest + ")\n"; out.String() != want {
		t.Errorf("discover before attaching: %q, want %q", out, want)
	}

	ios, out, _ = testIO()
	a := &attachOptions{io: ios, Ref: repo + ":1.0.0", File: sbom, ArtifactType: "application/spdx+json", output: jsonOut}
	if err := runAttach(ctx, a); err != nil {
		t.Fatal(err)
	}
	var attached map[string]string
	decodeJSON(t, out, &attached)
	if attached["subject"] != digest || attached["artifact_type"] != "application/spdx+json" || !strings.HasPrefix(attached["referrer"], "sha256:") {
		t.Fatalf("attach JSON: %v", attached)
	}

	ios, out, _ = testIO()
	if err := runDiscover(ctx, &discoverOptions{io: ios, Ref: repo + ":1.0.0", Depth: 2, output: textOut}); err != nil {
		t.Fatal(err)
	}
	want := repo + ":1.0.0 (" + digest + ")\n  └ application/spdx+json " + attached["referrer"] + " [sbom.spdx.json]\n"
	if out.String() != want {
		t.Errorf("discover:\n%s\nwant:\n%s", out, want)
	}

	// A signature is a referrer too, and JSON lists both.
	key, _ := keyPair(t, "k")
	sig := signLayout(t, repo, key, false)
	ios, out, _ = testIO()
	if err := runDiscover(ctx, &discoverOptions{io: ios, Ref: repo + ":1.0.0", Depth: 2, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var found struct {
		Subject   string `json:"subject"`
		Referrers []struct {
			Digest       string   `json:"digest"`
			ArtifactType string   `json:"artifact_type"`
			Files        []string `json:"files"`
		} `json:"referrers"`
	}
	decodeJSON(t, out, &found)
	seen := map[string]string{}
	for _, r := range found.Referrers {
		seen[r.Digest] = r.ArtifactType
	}
	if found.Subject != digest || len(found.Referrers) != 2 || seen[attached["referrer"]] != "application/spdx+json" || seen[sig] == "" {
		t.Errorf("discover JSON: %+v (signature %s)", found, sig)
	}
}

func TestAttachTextAndErrors(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	report := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(report, []byte("all good\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, out, _ := testIO()
	if err := runAttach(ctx, &attachOptions{io: ios, Ref: repo + ":1.0.0", File: report, ArtifactType: "text/x-report", MediaType: "text/plain", output: textOut}); err != nil {
		t.Fatal(err)
	}
	prefix := "Attached " + report + " to " + repo + ":1.0.0 (" + digest + ") as sha256:"
	if !strings.HasPrefix(out.String(), prefix) {
		t.Errorf("attach output %q, want it to start %q", out, prefix)
	}

	wantUsageError(t, runAttach(ctx, &attachOptions{io: ios, Ref: repo + ":1.0.0", File: report, output: textOut}), "attach: --artifact-type is required")
	wantUsageError(t, runAttach(ctx, &attachOptions{io: ios, Ref: repo, File: report, ArtifactType: "x/y", output: textOut}), "name a version")
	wantErrorContaining(t, runAttach(ctx, &attachOptions{io: ios, Ref: repo + ":1.0.0", File: report + ".missing", ArtifactType: "x/y", output: textOut}), "attach: stat "+report+".missing")
	wantErrorContaining(t, runAttach(ctx, &attachOptions{io: ios, Ref: repo + ":2.0.0", File: report, ArtifactType: "x/y", output: textOut}), "2.0.0 not found in")
	wantUsageError(t, runDiscover(ctx, &discoverOptions{io: ios, Ref: repo, output: textOut}), "name a version")
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{"sbom.json": "sbom.json", "a/b/sbom.json": "sbom.json", `c:\x\r.txt`: "r.txt"} {
		if got := baseName(in); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
}
