package tofufiles

import (
	"strings"
	"testing"
)

// TestUserFilesUnderWindowsRules: on Windows the CLI configuration is in %APPDATA% (a path with a
// drive letter), named tofu.rc (terraform.rc when only that exists; terraform's always), with
// terraform.d beside it, whatever HOME and XDG_CONFIG_HOME say, as OpenTofu's cliconfig finds it
// there. Run with Windows' rules on any system: the OS, environment, files and path joining are
// given.
func TestUserFilesUnderWindowsRules(t *testing.T) {
	const appdata = `C:\Users\Alice Smith\AppData\Roaming`
	env := map[string]string{"APPDATA": appdata, "HOME": "/home/alice", "XDG_CONFIG_HOME": "/home/alice/.config"}
	have := map[string]bool{}
	win := system{goos: "windows", getenv: func(k string) string { return env[k] },
		exists: func(p string) bool { return have[p] },
		join:   func(parts ...string) string { return strings.Join(parts, `\`) }}

	home := win.homeDir()
	if home != appdata {
		t.Fatalf("home %q, want %%APPDATA%% %q", home, appdata)
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	check("tofu's file, none there", win.mainFile(home, false), appdata+`\tofu.rc`)
	have[appdata+`\terraform.rc`] = true
	check("tofu's file, only terraform.rc there", win.mainFile(home, false), appdata+`\terraform.rc`)
	have[appdata+`\tofu.rc`] = true
	check("tofu's file, both there", win.mainFile(home, false), appdata+`\tofu.rc`)
	check("terraform's file", win.mainFile(home, true), appdata+`\terraform.rc`)
	check("configuration directory", win.configDir(home, false), appdata+`\terraform.d`)
}
