package oci

import (
	"os"
	"path/filepath"
	"runtime"

	"oras.land/oras-go/v2/registry/remote"

	"github.com/oprov/oprov/pkg/tofufiles"
)

// TofuCredentialFiles gives the docker-style credential files OpenTofu must be pointed at to
// use the credentials oprov uses, or nil when it finds them on its own. OpenTofu searches
// containers' auth.json and ~/.docker/config.json, but ignores DOCKER_CONFIG, REGISTRY_AUTH_FILE
// and --registry-config (configPath). When oprov reads from one of those, the answer is that file
// followed by the default files OpenTofu would have read, so naming them loses nothing. Only
// files that exist are given: OpenTofu refuses a listed file that is missing.
func TofuCredentialFiles(configPath string) []string {
	var mine []string
	switch {
	case configPath != "":
		mine = append(mine, configPath)
	case os.Getenv("DOCKER_CONFIG") != "":
		mine = append(mine, filepath.Join(os.Getenv("DOCKER_CONFIG"), "config.json"))
	}
	if configPath == "" && os.Getenv("REGISTRY_AUTH_FILE") != "" {
		mine = append(mine, os.Getenv("REGISTRY_AUTH_FILE"))
	}
	defaults := tofuDefaultCredentialFiles()
	seen := map[string]bool{}
	for _, d := range defaults {
		seen[d] = true
	}
	var out []string
	for _, p := range mine {
		if abs, err := filepath.Abs(p); err == nil && !seen[abs] && regularFile(abs) {
			seen[abs] = true
			out = append(out, abs)
		}
	}
	if len(out) == 0 {
		return nil
	}
	for _, d := range defaults {
		if regularFile(d) {
			out = append(out, d)
		}
	}
	return out
}

// tofuDefaultCredentialFiles is where OpenTofu looks for docker-style credentials when its CLI
// configuration names no files (containers-auth.json(5), then docker's).
func tofuDefaultCredentialFiles() []string {
	home, _ := os.UserHomeDir()
	var out []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && runtime.GOOS == "linux" {
		out = append(out, filepath.Join(d, "containers", "auth.json"))
	} else if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		out = append(out, filepath.Join(home, ".config", "containers", "auth.json"))
	}
	xdg := os.Getenv("XDG_CONFIG_HOME")
	if xdg == "" {
		xdg = filepath.Join(home, ".config")
	}
	return append(out, filepath.Join(xdg, "containers", "auth.json"), filepath.Join(home, ".docker", "config.json"), filepath.Join(home, ".dockercfg"))
}

func regularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// TofuCredentials is the CLI configuration block that points OpenTofu at files (an
// oci_default_credentials block with docker_style_config_files): one item, or none for no files.
func TofuCredentials(files []string) []tofufiles.Item {
	if len(files) == 0 {
		return nil
	}
	slashed := make([]string, len(files))
	for i, f := range files {
		slashed[i] = filepath.ToSlash(f)
	}
	return []tofufiles.Item{tofufiles.OCIDefaultCredentials(slashed)}
}

// IsPlainHTTP reports whether a target talks plain HTTP (asked for, or a loopback registry that
// answered HTTPS with HTTP). OpenTofu's OCI client speaks only HTTPS.
func IsPlainHTTP(t Target) bool {
	r, ok := t.(*remote.Repository)
	return ok && r.PlainHTTP
}
