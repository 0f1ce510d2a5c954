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
	here := system{goos: runtime.GOOS, getenv: os.Getenv, exists: exists, join: filepath.Join}
	home := here.homeDir()
	if home == "" {
		return nil
	}
	terraform := strings.Contains(filepath.Base(program), "terraform")
	files := existing(here.mainFile(home, terraform))
	dir := here.configDir(home, terraform)
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

// system is what the file locations depend on: the OS (its rules, not necessarily this one's:
// tests give Windows'), the environment, which files exist, and how paths join.
type system struct {
	goos   string
	getenv func(string) string
	exists func(string) bool
	join   func(...string) string
}

// homeDir is $HOME, else the user database's, as tofu finds it; %APPDATA% on Windows.
func (sys system) homeDir() string {
	if sys.goos == "windows" {
		return sys.getenv("APPDATA")
	}
	if h := sys.getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil {
		return u.HomeDir
	}
	return ""
}

func (sys system) mainFile(home string, terraform bool) string {
	newName, legacy := ".tofurc", ".terraformrc"
	if sys.goos == "windows" {
		newName, legacy = "tofu.rc", "terraform.rc"
	}
	if terraform {
		return sys.join(home, legacy)
	}
	newPath, legacyPath := sys.join(home, newName), sys.join(home, legacy)
	xdg := sys.getenv("XDG_CONFIG_HOME")
	switch {
	case sys.goos != "windows" && xdg != "" && !sys.exists(newPath) && !sys.exists(legacyPath):
		return sys.join(xdg, "opentofu", "tofurc")
	case sys.exists(legacyPath) && !sys.exists(newPath):
		return legacyPath
	}
	return newPath
}

func (sys system) configDir(home string, terraform bool) string {
	if sys.goos == "windows" {
		return sys.join(home, "terraform.d")
	}
	dir := sys.join(home, ".terraform.d")
	if xdg := sys.getenv("XDG_CONFIG_HOME"); !terraform && xdg != "" && !sys.exists(dir) {
		return sys.join(xdg, "opentofu")
	}
	return dir
}
