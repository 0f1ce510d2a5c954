package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyLayoutToLayout(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t)
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, true) // a legacy .sig tag, which plain referrer copies drop
	dst := "oci-layout:" + filepath.Join(t.TempDir(), "copy")

	ios, out, _ := testIO()
	if err := runCopy(ctx, &copyOptions{io: ios, Src: repo + ":1.0.0", Dst: dst, output: textOut}); err != nil {
		t.Fatal(err)
	}
	prefix := "Copied 1.0.0 from " + repo + " to " + dst + ": "
	if !strings.HasPrefix(out.String(), prefix) || !strings.HasSuffix(out.String(), ", 0 already there\n") {
		t.Errorf("copy output %q", out)
	}

	ios, out, _ = testIO()
	if err := runVerify(ctx, &verifyOptions{io: ios, Ref: dst + ":1.0.0", Keys: []string{pub}, output: textOut}); err != nil {
		t.Fatalf("the copy's signature: %v", err)
	}
	if !strings.Contains(out.String(), "("+digest+")") || !strings.Contains(out.String(), "(legacy-tag)") {
		t.Errorf("verify of the copy:\n%s", out)
	}

	// Copying again moves nothing.
	ios, out, _ = testIO()
	if err := runCopy(ctx, &copyOptions{io: ios, Src: repo, Dst: dst, AllVersions: true, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Tags     []string `json:"tags"`
		Uploaded int      `json:"uploaded"`
		Skipped  int      `json:"skipped"`
	}
	decodeJSON(t, out, &res)
	if strings.Join(res.Tags, ",") != "1.0.0" || res.Uploaded != 0 || res.Skipped == 0 {
		t.Errorf("second copy: %+v", res)
	}
}

func TestCopyErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	src, dst := "oci-layout:"+t.TempDir(), "oci-layout:"+filepath.Join(t.TempDir(), "dst")
	const oneVersion = "copy: name one version (SRC:VERSION), or give --version CONSTRAINT or --all-versions"
	wantUsageError(t, runCopy(ctx, &copyOptions{io: ios, Src: src, Dst: dst, output: textOut}), oneVersion)
	wantUsageError(t, runCopy(ctx, &copyOptions{io: ios, Src: src + ":1.0.0", Dst: dst, AllVersions: true, output: textOut}), oneVersion)
	wantUsageError(t, runCopy(ctx, &copyOptions{io: ios, Src: src, Dst: dst, Constraint: "~> 1.0", AllVersions: true, output: textOut}), oneVersion)
	wantUsageError(t, runCopy(ctx, &copyOptions{io: ios, Src: src + ":1.0.0", Dst: dst + ":1.0.0", output: textOut}), "copy: the destination is a repository")

	repo, _ := pushedLayout(t)
	wantErrorContaining(t, runCopy(ctx, &copyOptions{io: ios, Src: repo, Dst: dst, Constraint: ">= 2.0", output: textOut}), `no version meets ">= 2.0"`)
}
