package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func TestMirrorErrorsBeforeTheNetwork(t *testing.T) {
	ctx := context.Background()
	ios, _, _ := testIO()
	dir := filepath.Join(t.TempDir(), "mirror")
	to := "oci-layout:" + dir
	wantUsageError(t, runMirror(ctx, &mirrorOptions{io: ios, Address: "hashicorp/random", output: textOut}), "mirror: --to REPO is required")
	wantUsageError(t, runMirror(ctx, &mirrorOptions{io: ios, Address: "a/b/c/d", To: to, output: textOut}), "a/b/c/d")
	wantUsageError(t, runMirror(ctx, &mirrorOptions{io: ios, Address: "hashicorp/random", To: to + ":1.0.0", output: textOut}), "mirror: --to names a repository")
	wantUsageError(t, runMirror(ctx, &mirrorOptions{io: ios, Address: "hashicorp/random", To: to, Platforms: []string{"linux"}, output: textOut}), "--platform")
	key := filepath.Join(t.TempDir(), "key.asc")
	if err := os.WriteFile(key, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantErrorContaining(t, runMirror(ctx, &mirrorOptions{io: ios, Address: "hashicorp/random", To: to, GPGKeys: []string{key}, output: textOut}), key+" is not an armored OpenPGP key")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a mirror refused before it began created %s", dir)
	}
}
