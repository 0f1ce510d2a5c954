package tests

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// fakeZip writes a small release zip holding the given files (name -> content); names starting
// with terraform-provider- are marked executable. It returns the zip's hex sha256.
func fakeZip(t testing.TB, path string, files map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, content := range files {
		h := &zip.FileHeader{Name: name, Method: zip.Deflate}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "terraform-provider-") {
			mode = 0o755
		}
		h.SetMode(mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(w, content)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, _ := os.ReadFile(path)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// fakeRelease writes zips for typ/version on the given platforms into dir, with SHA256SUMS.
func fakeRelease(t testing.TB, dir, typ, version string, platforms ...string) {
	t.Helper()
	var sums strings.Builder
	for _, p := range platforms {
		name := fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, version, p)
		exe := fmt.Sprintf("terraform-provider-%s_v%s", typ, version)
		if strings.HasPrefix(p, "windows_") {
			exe += ".exe"
		}
		sum := fakeZip(t, filepath.Join(dir, name), map[string]string{exe: "#!/bin/sh\necho " + p + "\n"})
		fmt.Fprintf(&sums, "%s  %s\n", sum, name)
	}
	writeFile(t, filepath.Join(dir, fmt.Sprintf("terraform-provider-%s_%s_SHA256SUMS", typ, version)), sums.String())
}

// TestPushRefusesBadInput: every bad input gets a clear message and exit code 1, and nothing
// reaches the registry.
func TestPushRefusesBadInput(t *testing.T) {
	reg := testreg.Start(t, testreg.Options{})
	authReg := testreg.Start(t, testreg.Options{Users: map[string]string{"ci": "s3cret"}})

	cases := append(badReleaseCases(), badTargetCases(authReg)...)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expectPushRefused(t, reg, i, tc)
		})
	}

	t.Run("login then push succeeds", func(t *testing.T) {
		loginThenPush(t, authReg)
	})
}

// badPushCase is one push that must be refused.
type badPushCase struct {
	name  string
	setup func(t *testing.T, dir string) []string // returns push arguments before REPO
	repo  func(repo string) string                // the REPO argument, from the default
	reg   *testreg.Registry
	want  string // a phrase the error must contain
	code  int    // the exit code, when not 1
}

// badReleaseCases are releases that are wrong in themselves.
func badReleaseCases() []badPushCase {
	return []badPushCase{
		{
			name: "mixed versions",
			setup: func(t *testing.T, dir string) []string {
				fakeZip(t, filepath.Join(dir, "terraform-provider-x_1.0.0_linux_amd64.zip"), map[string]string{"terraform-provider-x_v1.0.0": "a"})
				fakeZip(t, filepath.Join(dir, "terraform-provider-x_1.1.0_linux_arm64.zip"), map[string]string{"terraform-provider-x_v1.1.0": "b"})
				return []string{dir}
			},
			want: "mixed versions",
		},
		{
			name: "mixed types",
			setup: func(t *testing.T, dir string) []string {
				fakeZip(t, filepath.Join(dir, "terraform-provider-x_1.0.0_linux_amd64.zip"), map[string]string{"terraform-provider-x_v1.0.0": "a"})
				fakeZip(t, filepath.Join(dir, "terraform-provider-y_1.0.0_linux_arm64.zip"), map[string]string{"terraform-provider-y_v1.0.0": "b"})
				return []string{dir}
			},
			want: "mixed provider types",
		},
		{
			name: "file name outside the convention",
			setup: func(t *testing.T, dir string) []string {
				fakeZip(t, filepath.Join(dir, "hello-linux.zip"), map[string]string{"terraform-provider-x_v1.0.0": "a"})
				return []string{filepath.Join(dir, "hello-linux.zip")}
			},
			want: "terraform-provider-TYPE_VERSION_OS_ARCH.zip",
		},
		{
			name: "zip disagrees with SHA256SUMS",
			setup: func(t *testing.T, dir string) []string {
				fakeRelease(t, dir, "x", "1.0.0", "linux_amd64", "darwin_arm64")
				fakeZip(t, filepath.Join(dir, "terraform-provider-x_1.0.0_darwin_arm64.zip"), map[string]string{"terraform-provider-x_v1.0.0": "tampered"})
				return []string{dir}
			},
			want: "does not match SHA256SUMS",
		},
		{
			name: "zip without the provider executable",
			setup: func(t *testing.T, dir string) []string {
				fakeZip(t, filepath.Join(dir, "terraform-provider-x_1.0.0_linux_amd64.zip"), map[string]string{"README.md": "no binary here"})
				return []string{dir}
			},
			want: "no provider executable",
		},
		{
			name: "two zips for one platform",
			setup: func(t *testing.T, dir string) []string {
				a, b := filepath.Join(dir, "a", "terraform-provider-x_1.0.0_linux_amd64.zip"), filepath.Join(dir, "b", "terraform-provider-x_1.0.0_linux_amd64.zip")
				fakeZip(t, a, map[string]string{"terraform-provider-x_v1.0.0": "a"})
				fakeZip(t, b, map[string]string{"terraform-provider-x_v1.0.0": "b"})
				return []string{a, b}
			},
			want: "two zips for platform linux_amd64",
		},
	}
}

// badTargetCases are good releases pushed where they cannot go.
func badTargetCases(authReg *testreg.Registry) []badPushCase {
	return []badPushCase{
		{
			name: "unreachable registry",
			setup: func(t *testing.T, dir string) []string {
				fakeRelease(t, dir, "x", "1.0.0", "linux_amd64")
				return []string{dir}
			},
			repo: func(string) string { return "127.0.0.1:1/providers/acme/x" },
			want: "cannot reach 127.0.0.1:1",
			code: 3,
		},
		{
			name: "401 from the registry",
			setup: func(t *testing.T, dir string) []string {
				fakeRelease(t, dir, "x", "1.0.0", "linux_amd64")
				return []string{dir}
			},
			reg:  authReg,
			want: "oprov login " + authReg.Host,
			code: 4,
		},
		{
			name: "tag that is not a version",
			setup: func(t *testing.T, dir string) []string {
				fakeRelease(t, dir, "x", "1.0.0", "linux_amd64")
				return []string{dir}
			},
			repo: func(r string) string { return r + ":latest" },
			want: `tag "latest" is not a version`,
		},
		{
			name: "explicit tag disagrees with the zips",
			setup: func(t *testing.T, dir string) []string {
				fakeRelease(t, dir, "x", "1.0.0", "linux_amd64")
				return []string{dir}
			},
			repo: func(r string) string { return r + ":2.0.0" },
			want: "the tag says version 2.0.0 but the zips are version 1.0.0",
		},
	}
}

// expectPushRefused runs case i's push and checks that it was refused cleanly and left nothing
// in the registry.
func expectPushRefused(t *testing.T, reg *testreg.Registry, i int, tc badPushCase) {
	t.Helper()
	r := reg
	if tc.reg != nil {
		r = tc.reg
	}
	repoPath := fmt.Sprintf("bad/case%d/x", i)
	repo := r.Host + "/" + repoPath
	if tc.repo != nil {
		repo = tc.repo(repo)
	}
	args := append([]string{"push"}, tc.setup(t, t.TempDir())...)
	args = append(args, repo, "--ca-file", r.CAFile, "--registry-config", filepath.Join(t.TempDir(), "none.json"))
	res := oprov(t, nil, args...)
	if want := max(tc.code, 1); res.Code != want {
		t.Errorf("exit code %d, want %d\nstderr: %s", res.Code, want, res.Stderr)
	}
	if !strings.Contains(res.Stderr, tc.want) {
		t.Errorf("stderr does not say %q:\n%s", tc.want, res.Stderr)
	}
	if strings.Contains(res.Stderr, "panic") || strings.Contains(res.Stderr, "goroutine ") {
		t.Errorf("stderr shows a panic:\n%s", res.Stderr)
	}
	if res.Stdout != "" {
		t.Errorf("stdout should be empty on failure, got:\n%s", res.Stdout)
	}
	if r.RepoExists(repoPath) {
		t.Errorf("the registry has content for %s after a refused push", repoPath)
	}
}

// loginThenPush: oprov login with the right password lets push through; logout takes it back.
func loginThenPush(t *testing.T, authReg *testreg.Registry) {
	dir := t.TempDir()
	fakeRelease(t, dir, "x", "1.0.0", "linux_amd64")
	creds := filepath.Join(t.TempDir(), "config.json")
	r := oprov(t, nil, "login", authReg.Host, "-u", "ci", "--password-stdin", "--ca-file", authReg.CAFile, "--registry-config", creds)
	if r.Code == 0 {
		t.Fatalf("login without a password on stdin should fail")
	}
	login := exec_with_stdin(t, "s3cret\n", "login", authReg.Host, "-u", "ci", "--password-stdin", "--ca-file", authReg.CAFile, "--registry-config", creds)
	if login.Code != 0 {
		t.Fatalf("login: exit %d: %s", login.Code, login.Stderr)
	}
	bad := exec_with_stdin(t, "wrong\n", "login", authReg.Host, "-u", "ci", "--password-stdin", "--ca-file", authReg.CAFile, "--registry-config", filepath.Join(t.TempDir(), "c.json"))
	if bad.Code != 4 || !strings.Contains(bad.Stderr, "401") {
		t.Errorf("login with a wrong password: exit %d, stderr %q", bad.Code, bad.Stderr)
	}
	mustOprov(t, nil, "push", dir, authReg.Host+"/ok/x", "--ca-file", authReg.CAFile, "--registry-config", creds)
	if !authReg.RepoExists("ok/x") {
		t.Errorf("push after login left nothing in the registry")
	}
	mustOprov(t, nil, "logout", authReg.Host, "--registry-config", creds)
	r = oprov(t, nil, "inspect", authReg.Host+"/ok/x", "--ca-file", authReg.CAFile, "--registry-config", creds)
	if r.Code != 4 || !strings.Contains(r.Stderr, "oprov login") {
		t.Errorf("inspect after logout: exit %d, stderr %q", r.Code, r.Stderr)
	}
}
