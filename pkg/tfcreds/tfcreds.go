// Package tfcreds finds the API token OpenTofu (and Terraform) would send to a registry host, so
// oprov authenticates to an origin registry the way the user's own tofu does:
//
//  1. an environment variable TF_TOKEN_<host>, where the host is written with its dots as
//     underscores and its dashes as double underscores (TF_TOKEN_app_terraform_io,
//     TF_TOKEN_my__registry_example_com); a host with non-ASCII letters is written in its
//     punycode (ACE) form, so café.example reads TF_TOKEN_xn____caf__dma_example. The host part
//     is matched without regard to case, and the dotted or dashed host also works where a shell
//     allows it;
//  2. a credentials "HOST" { token = "..." } block in the CLI configuration file:
//     TF_CLI_CONFIG_FILE, else ~/.tofurc, ~/.terraformrc or $XDG_CONFIG_HOME/opentofu/tofurc
//     (tofu.rc or terraform.rc in %APPDATA% on Windows);
//  3. the same block in credentials.tfrc.json in ~/.terraform.d (%APPDATA%\terraform.d), where
//     `tofu login` keeps tokens.
//
// Hosts are compared as OpenTofu does: lower case, punycode, without the default port 443.
// Files are read as OpenTofu reads them (pkg/tofufiles: HCL 1, native or JSON). Credentials
// helpers (credentials_helper blocks) are not run.
package tfcreds

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/net/idna"

	"github.com/oprov/oprov/pkg/tofufiles"
)

// EnvPrefix starts the name of every token variable.
const EnvPrefix = "TF_TOKEN_"

// Token is a token found for a host, and where it was found.
type Token struct {
	Value  string
	Source string // the variable's name, or the file's path
}

// Normalize gives the form hosts are compared in: lower case and punycode (IDNA), without the
// default port 443.
func Normalize(host string) (string, error) {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = strings.Trim(host, "[]"), ""
	}
	var ascii string
	if ip := net.ParseIP(name); ip != nil {
		ascii = ip.String()
	} else if ascii, err = idna.Lookup.ToASCII(strings.TrimSuffix(name, ".")); err != nil || ascii == "" {
		return "", fmt.Errorf("%q is not a valid host name", host)
	}
	if strings.Trim(port, "0123456789") != "" {
		return "", fmt.Errorf("%q has a bad port", host)
	}
	if port == "" || port == "443" {
		if strings.Contains(ascii, ":") {
			return "[" + ascii + "]", nil
		}
		return ascii, nil
	}
	return net.JoinHostPort(ascii, port), nil
}

// EnvName is the variable OpenTofu reads host's token from, or "" when none can name it (a host
// with a port other than 443, or not a valid host name).
func EnvName(host string) string {
	h, err := Normalize(host)
	if err != nil || strings.Contains(h, ":") {
		return ""
	}
	return EnvPrefix + strings.ReplaceAll(strings.ReplaceAll(h, "-", "__"), ".", "_")
}

// Lookup finds host's token: from the environment first, then the CLI configuration, then
// credentials.tfrc.json. It gives nil when there is none. A configuration file that cannot be
// read or parsed does not stop the search: it is reported in the error, next to any token found
// elsewhere.
func Lookup(host string) (*Token, error) {
	want, err := Normalize(host)
	if err != nil {
		return nil, err
	}
	if tok := fromEnv(want); tok != nil {
		return tok, nil
	}
	var errs []error
	for _, path := range ConfigFiles() {
		tok, err := fromFile(path, want)
		if err != nil {
			errs = append(errs, err)
		}
		if tok != nil {
			return tok, errors.Join(errs...)
		}
	}
	return nil, errors.Join(errs...)
}

// fromEnv finds a TF_TOKEN_ variable naming the host. An empty value counts as none.
func fromEnv(want string) *Token {
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || value == "" {
			continue
		}
		// Double underscores first: a dash cannot start or end a label, so "___" never occurs
		// in a valid name and the two replacements cannot be confused.
		raw := strings.ReplaceAll(strings.ReplaceAll(name[len(EnvPrefix):], "__", "-"), "_", ".")
		if h, err := Normalize(raw); err == nil && h == want {
			return &Token{Value: value, Source: name}
		}
	}
	return nil
}

// ConfigFiles lists, in the order they are searched, the files that may hold credentials
// blocks: the CLI configuration file OpenTofu reads (whether or not it exists) and
// credentials.tfrc.json.
func ConfigFiles() []string {
	var files []string
	if p := os.Getenv("TF_CLI_CONFIG_FILE"); p != "" {
		files = append(files, p)
	} else if p := mainConfigFile(); p != "" {
		files = append(files, p)
	}
	if dir := userDir(); dir != "" {
		name := ".terraform.d"
		if runtime.GOOS == "windows" {
			name = "terraform.d"
		}
		files = append(files, filepath.Join(dir, name, "credentials.tfrc.json"))
	}
	return files
}

// mainConfigFile is the first of the usual CLI configuration files that exists, or the first
// of them when none does.
func mainConfigFile() string {
	dir := userDir()
	if dir == "" {
		return ""
	}
	candidates := []string{filepath.Join(dir, ".tofurc"), filepath.Join(dir, ".terraformrc")}
	if runtime.GOOS == "windows" {
		candidates = []string{filepath.Join(dir, "tofu.rc"), filepath.Join(dir, "terraform.rc")}
	} else if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
		candidates = append(candidates, filepath.Join(xdg, "opentofu", "tofurc"))
	} else {
		candidates = append(candidates, filepath.Join(dir, ".config", "opentofu", "tofurc"))
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return candidates[0]
}

// userDir is where the CLI configuration lives: the home directory, or %APPDATA% on Windows.
func userDir() string {
	if runtime.GOOS == "windows" {
		return os.Getenv("APPDATA")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return home
}

// fromFile reads the token of a credentials block for the host from one file, as OpenTofu reads
// it (tofufiles: HCL 1, native or JSON). A missing file holds none.
func fromFile(path, want string) (*Token, error) {
	src, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the CLI configuration: %w", err)
	}
	cfg, err := tofufiles.ParseCLIConfig(path, src)
	if err != nil {
		return nil, err
	}
	for _, it := range cfg.Settings {
		if len(it.Keys) != 2 || it.Keys[0] != "credentials" || !it.IsBlock() {
			continue
		}
		if h, err := Normalize(it.Keys[1]); err != nil || h != want {
			continue
		}
		for _, a := range it.Value.Object {
			if len(a.Keys) != 1 || a.Keys[0] != "token" {
				continue
			}
			if a.Value.Kind != tofufiles.String {
				return nil, fmt.Errorf("%s:%d: the token for %s is not a string", path, it.Line, it.Keys[1])
			}
			return &Token{Value: a.Value.Text, Source: path}, nil
		}
	}
	return nil, nil
}
