package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPackageBinJSON(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	dist := filepath.Join(t.TempDir(), "dist")
	ios, out, _ := testIO()
	o := &packageOptions{io: ios, BinDir: fakeBinaries(t, "linux_amd64", "darwin_arm64"), Version: "1.0.0", Name: "hello", OutDir: dist, output: jsonOut}
	if err := runPackage(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Type      string `json:"type"`
		Version   string `json:"version"`
		SHA256SUM string `json:"sha256sums"`
		Packages  []struct {
			Platform string `json:"platform"`
			Path     string `json:"path"`
			Size     int64  `json:"size"`
			ZH       string `json:"zh"`
			H1       string `json:"h1"`
		} `json:"packages"`
	}
	decodeJSON(t, out, &res)
	if res.Type != "hello" || res.Version != "1.0.0" || len(res.Packages) != 2 {
		t.Fatalf("packaged %+v", res)
	}
	sums, err := os.ReadFile(res.SHA256SUM)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"darwin_arm64", "linux_amd64"} {
		p := res.Packages[i]
		if p.Platform != want {
			t.Errorf("package %d is %s, want %s (sorted by platform)", i, p.Platform, want)
		}
		if filepath.Base(p.Path) != "terraform-provider-hello_1.0.0_"+want+".zip" {
			t.Errorf("%s zip is named %s", want, p.Path)
		}
		st, err := os.Stat(p.Path)
		if err != nil || st.Size() != p.Size {
			t.Errorf("%s: stat %v, size reported %d", p.Path, err, p.Size)
		}
		if !strings.HasPrefix(p.H1, "h1:") || !strings.HasPrefix(p.ZH, "zh:") {
			t.Errorf("%s hashes %q %q", want, p.H1, p.ZH)
		}
		line := strings.TrimPrefix(p.ZH, "zh:") + "  " + filepath.Base(p.Path) + "\n"
		if !strings.Contains(string(sums), line) {
			t.Errorf("SHA256SUMS lacks %q:\n%s", line, sums)
		}
	}
}

func TestPackageBinTextOnePlatform(t *testing.T) {
	dist := filepath.Join(t.TempDir(), "dist")
	ios, out, errb := testIO()
	o := &packageOptions{io: ios, BinDir: fakeBinaries(t, "linux_amd64", "darwin_arm64"), Version: "2.1.0", Name: "hello", Platforms: []string{"linux/amd64"}, OutDir: dist, output: textOut}
	if err := runPackage(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if want := "Packaged hello 2.1.0 for 1 platform into " + dist; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "  linux_amd64    h1:") || !strings.Contains(lines[2], "zh:") {
		t.Errorf("platform lines:\n%s", out)
	}
	if want := "Checksums: " + filepath.Join(dist, "terraform-provider-hello_2.1.0_SHA256SUMS"); lines[3] != want {
		t.Errorf("checksums line %q, want %q", lines[3], want)
	}
	if errb.Len() != 0 {
		t.Errorf("progress printed without a terminal: %q", errb)
	}
	entries, _ := os.ReadDir(dist)
	if len(entries) != 2 {
		t.Errorf("dist holds %d files, want the linux zip and SHA256SUMS", len(entries))
	}
}

func TestPackageErrors(t *testing.T) {
	bin := fakeBinaries(t, "linux_amd64")
	ios, _, _ := testIO()
	for _, c := range []struct {
		o    packageOptions
		want string
	}{
		{packageOptions{Version: "1.0.0"}, "give exactly one of --go DIR, --python DIR, --stdio DIR and --bin DIR"},
		{packageOptions{GoDir: ".", BinDir: bin, Version: "1.0.0"}, "give exactly one of --go DIR, --python DIR, --stdio DIR and --bin DIR"},
		{packageOptions{BinDir: bin}, "--version is required"},
		{packageOptions{BinDir: bin, Version: "1.0.0", Platforms: []string{"linux"}}, "--platform"},
	} {
		o := c.o
		o.io, o.OutDir, o.output = ios, t.TempDir(), textOut
		wantUsageError(t, runPackage(context.Background(), &o), c.want)
	}
	o := &packageOptions{io: ios, BinDir: bin, Version: "1.0.0", OutDir: t.TempDir(), output: textOut}
	wantErrorContaining(t, runPackage(context.Background(), o), "package: --bin needs --name TYPE")
	o.Name, o.Platforms = "hello", []string{"windows_amd64"}
	wantErrorContaining(t, runPackage(context.Background(), o), "has no windows_amd64 directory")
}
