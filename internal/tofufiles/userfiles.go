package tofufiles

import (
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
)

// UserFiles lists the CLI configuration files program (tofu, or terraform) reads, in the order
// it merges them, as OpenTofu 1.12 finds them (command/cliconfig):
//
//   - TF_CLI_CONFIG_FILE (else TERRAFORM_CONFIG) when set: that file alone (none when it is not
//     there: tofu goes on without it), and no configuration directory;
//   - otherwise the main file, ~/.tofurc (~/.terraformrc when only that exists, or
//     $XDG_CONFIG_HOME/opentofu/tofurc when neither does and XDG_CONFIG_HOME is set; terraform:
//     ~/.terraformrc), then every *.tfrc and *.tfrc.json in the configuration directory
//     (~/.terraform.d, or $XDG_CONFIG_HOME/opentofu when that is not there), by name; on Windows
//     tofu.rc or terraform.rc and terraform.d in %APPDATA%.
//
// Files that are not there are left out; a name that is there but is no file is listed, so that
// reading it fails as it does for tofu.
func UserFiles(program string) []string {
	if p := os.Getenv("TF_CLI_CONFIG_FILE"); p != "" {
		return existing(p)
	}
	if p := os.Getenv("TERRAFORM_CONFIG"); p != "" {
		return existing(p)
	}
	home := homeDir()
	if home == "" {
		return nil
	}
	terraform := strings.Contains(filepath.Base(program), "terraform")
	files := existing(mainFile(home, terraform))
	dir := configDir(home, terraform)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return files
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".tfrc") || strings.HasSuffix(n, ".tfrc.json") {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files
}

func existing(p string) []string {
	if _, err := os.Stat(p); err != nil {
		return nil
	}
	return []string{p}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// homeDir is $HOME, else the user database's, as tofu finds it; %APPDATA% on Windows.
func homeDir() string {
	if runtime.GOOS == "windows" {
		return os.Getenv("APPDATA")
	}
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
}

func mainFile(home string, terraform bool) string {
	newName, legacy := ".tofurc", ".terraformrc"
	if runtime.GOOS == "windows" {
		newName, legacy = "tofu.rc", "terraform.rc"
	}
	if terraform {
		return filepath.Join(home, legacy)
	}
	newPath, legacyPath := filepath.Join(home, newName), filepath.Join(home, legacy)
	xdg := os.Getenv("XDG_CONFIG_HOME")
	switch {
	case runtime.GOOS != "windows" && xdg != "" && !exists(newPath) && !exists(legacyPath):
		return filepath.Join(xdg, "opentofu", "tofurc")
	case exists(legacyPath) && !exists(newPath):
		return legacyPath
	}
	return newPath
}

func configDir(home string, terraform bool) string {
	if runtime.GOOS == "windows" {
		return filepath.Join(home, "terraform.d")
	}
	dir := filepath.Join(home, ".terraform.d")
	if xdg := os.Getenv("XDG_CONFIG_HOME"); !terraform && xdg != "" && !exists(dir) {
		return filepath.Join(xdg, "opentofu")
	}
	return dir
}
