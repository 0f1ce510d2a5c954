package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveLoadLayout(t *testing.T) {
	ctx := context.Background()
	repo, digest := pushedLayout(t) // the layout directory is named "hello"
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, false)
	tarball := filepath.Join(t.TempDir(), "hello.tar")

	ios, out, _ := testIO()
	if err := runSave(ctx, &saveOptions{io: ios, Refs: []string{repo + ":1.0.0"}, Out: tarball, output: textOut}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Saved hello:1.0.0 to " + tarball + " (" + humanBytes(st.Size()) + ")\n"; out.String() != want {
		t.Errorf("save output %q, want %q", out, want)
	}

	// Loading with a key that did not sign pushes nothing.
	_, otherPub := keyPair(t, "other")
	dest := filepath.Join(t.TempDir(), "loaded")
	ios, _, _ = testIO()
	err = runLoad(ctx, &loadOptions{io: ios, File: tarball, To: "oci-layout:" + dest, Keys: []string{otherPub}, output: textOut})
	wantErrorContaining(t, err, "nothing was pushed")
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("a refused load wrote %s: %v", dest, err)
	}

	ios, out, _ = testIO()
	if err := runLoad(ctx, &loadOptions{io: ios, File: tarball, To: "oci-layout:" + dest, Keys: []string{pub}, output: textOut}); err != nil {
		t.Fatal(err)
	}
	loaded := "oci-layout:" + filepath.Join(dest, "hello")
	if !strings.HasPrefix(out.String(), "Loaded 1.0.0 into "+loaded+": ") || !strings.HasSuffix(out.String(), ", 0 already there\nChecked: every blob against its digest, and every version's signature, by one of "+pub+".\n") {
		t.Errorf("load output %q", out)
	}

	// The signature travelled with the version.
	ios, out, _ = testIO()
	if err := runVerify(ctx, &verifyOptions{io: ios, Ref: loaded + ":1.0.0", Keys: []string{pub}, output: textOut}); err != nil {
		t.Fatalf("verifying the loaded copy: %v", err)
	}
	if !strings.HasPrefix(out.String(), "Verified "+loaded+":1.0.0 ("+digest+")") {
		t.Errorf("verify of the loaded copy: %q", out)
	}

	// Loading again sends nothing new.
	ios, out, _ = testIO()
	if err := runLoad(ctx, &loadOptions{io: ios, File: tarball, To: "oci-layout:" + dest, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var again []struct {
		Repository string `json:"repository"`
		Result     struct {
			Tags     []string `json:"tags"`
			Uploaded int      `json:"uploaded"`
		} `json:"result"`
	}
	decodeJSON(t, out, &again)
	if len(again) != 1 || again[0].Repository != loaded || again[0].Result.Uploaded != 0 || strings.Join(again[0].Result.Tags, ",") != "1.0.0" {
		t.Errorf("second load: %+v", again)
	}
}

func TestSaveAllVersionsJSON(t *testing.T) {
	ctx := context.Background()
	repo, _ := pushedLayout(t)
	tarball := filepath.Join(t.TempDir(), "all.tar")
	ios, out, _ := testIO()
	if err := runSave(ctx, &saveOptions{io: ios, Refs: []string{repo}, Out: tarball, output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	var res struct {
		File string   `json:"file"`
		Tags []string `json:"tags"`
	}
	decodeJSON(t, out, &res)
	if res.File != tarball || strings.Join(res.Tags, ",") != "hello:1.0.0" {
		t.Errorf("save JSON: %+v", res)
	}
}

func TestSaveLoadErrors(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	wantUsageError(t, runSave(ctx, &saveOptions{io: ios, Refs: []string{"oci-layout:x"}, output: textOut}), "save: --to FILE.tar is required")
	wantUsageError(t, runSave(ctx, &saveOptions{io: ios, Refs: []string{"nohost"}, Out: "x.tar", output: textOut}), "HOST[:PORT]/PATH")
	out := filepath.Join(t.TempDir(), "x.tar")
	err := runSave(ctx, &saveOptions{io: ios, Refs: []string{"oci-layout:" + filepath.Join(t.TempDir(), "missing")}, Out: out, output: textOut})
	wantErrorContaining(t, err, "not an OCI image layout")
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed save left %s", out)
	}
	wantUsageError(t, runLoad(ctx, &loadOptions{io: ios, File: "x.tar", output: textOut}), "load: --to HOST[/PREFIX] is required")
	wantUsageError(t, runLoad(ctx, &loadOptions{io: ios, File: "x.tar", To: "oci-layout:d", Keys: []string{"a.pub"}, Policy: "p.hcl", output: textOut}), "give --key or --policy, not both")
	wantErrorContaining(t, runLoad(ctx, &loadOptions{io: ios, File: filepath.Join(t.TempDir(), "none.tar"), To: "oci-layout:d", output: textOut}), "(nothing was pushed)")
}
