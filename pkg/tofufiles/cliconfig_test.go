package tofufiles

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// awkward are strings that %q (Go quoting) gets wrong for OpenTofu's readers.
var awkward = []string{
	"/srv/${HOME}/mirror", "/srv/%{if x}y%{endif}", `C:\mirror "x"`, "tab\there\nnewline\x01\x7f",
	"$${already}", "${", "%{", "${unterminated", "a${\"q\"}b", "${a}${b}}", "é\u2028x", "",
}

// full is a configuration with every method and setting kind, its strings from awkward.
func full(s string) *CLIConfig {
	return &CLIConfig{
		Installation: &Installation{Methods: []Method{
			{Kind: DevOverrides, Overrides: []Override{{Provider: "hashicorp/null", Dir: s}, {Provider: "example.com/" + s + "/x", Dir: "/d"}}},
			{Kind: FilesystemMirror, Path: s, Include: []string{"example.com/acme/hello", s}},
			{Kind: NetworkMirror, URL: "https://m.example/" + s, Exclude: []string{s}, Other: []Item{attr("download_retry_count", Value{Kind: kindNumber, Text: "3"}), attr("trust_all_hashes", Value{Kind: kindBool, Text: "true"})}},
			{Kind: OCIMirror, RepositoryTemplate: "reg.example/" + s + "/${namespace}/${type}", Include: []string{"example.com/*/*"}},
			{Kind: Direct, Exclude: []string{"example.com/acme/hello"}},
		}},
		Settings: []Item{
			attr("plugin_cache_dir", str(s)),
			block([]string{"credentials", "app.terraform.io"}, attr("token", str(s))),
			block([]string{"host", "example.com"}, block([]string{"services"}, attr("providers.v1", str("https://example.com/"+s)))),
			OCIDefaultCredentials([]string{s, "/home/u/.docker/config.json"}),
			block([]string{"credentials_helper", "x"}, attr("args", strList([]string{s}))),
		},
	}
}

// strip drops where items were read, for comparing.
func strip(c *CLIConfig) *CLIConfig {
	out := *c
	out.Comment, out.SettingsComment = nil, nil
	out.Settings = stripItems(c.Settings)
	if c.Installation != nil {
		in := *c.Installation
		in.From, in.Line, in.Comment = "", 0, nil
		in.Methods = nil
		for _, m := range c.Installation.Methods {
			m.Other = stripItems(m.Other)
			in.Methods = append(in.Methods, m)
		}
		out.Installation = &in
	}
	return &out
}

func stripItems(items []Item) []Item {
	var out []Item
	for _, it := range items {
		it.From, it.Line = "", 0
		it.Value = stripValue(it.Value)
		out = append(out, it)
	}
	return out
}

func stripValue(v Value) Value {
	if v.Kind == kindObject {
		v.Object = stripItems(v.Object)
		if v.Object == nil {
			v.Object = []Item{}
		}
	}
	if v.Kind == kindList {
		list := []Value{}
		for _, e := range v.List {
			list = append(list, stripValue(e))
		}
		v.List = list
	}
	return v
}

// roundTrip renders c, reads it back as OpenTofu does (HCL 1) and checks that every value came
// back; it returns the text.
func roundTrip(t *testing.T, c *CLIConfig) string {
	t.Helper()
	text, err := c.Bytes()
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	back, err := ParseCLIConfig("rendered", text)
	if err != nil {
		t.Fatalf("HCL 1 does not read what was written: %v\n%s", err, text)
	}
	if got, want := strip(back), strip(c); !reflect.DeepEqual(got, want) {
		t.Fatalf("read back:\n%#v\nwant:\n%#v\ntext:\n%s", got, want, text)
	}
	return string(text)
}

// TestCLIConfigRoundTrip: every method and setting, with strings that hold template sequences,
// quotes, backslashes and control characters, reads back the same through HCL 1.
func TestCLIConfigRoundTrip(t *testing.T) {
	for _, s := range awkward {
		text := roundTrip(t, full(s))
		if !regexp.MustCompile(`"hashicorp/null" +=`).MatchString(text) {
			t.Errorf("dev_overrides' key is not quoted:\n%s", text)
		}
	}
	text := roundTrip(t, full("/srv/${HOME}"))
	for _, want := range []string{`path    = "/srv/${HOME}"`, `repository_template = "reg.example//srv/${HOME}/${namespace}/${type}"`} {
		if !strings.Contains(text, want) {
			t.Errorf("a plain ${NAME} was not kept as written (%s):\n%s", want, text)
		}
	}
	if _, err := full("bad \xff").Bytes(); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("a string that is not UTF-8 was written: %v", err)
	}
}

// TestCLIConfigHCL2Reads: what is written for a configuration without quoted keys also parses as
// HCL 2, and each value, with its plain ${NAME} standing for itself, is the one written.
func TestCLIConfigHCL2Reads(t *testing.T) {
	for _, s := range awkward {
		c := full(s)
		c.Installation.Methods = c.Installation.Methods[1:] // dev_overrides' keys are quoted
		c.Settings[2] = block([]string{"host", "example.com"})
		text, err := c.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		got := hcl2Strings(t, text)
		want := modelStrings(c)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("HCL 2 reads %q\nwant %q\ntext:\n%s", got, want, text)
		}
	}
}

// hcl2Strings parses text as HCL 2 and gives every string value in it, a variable X read as
// "${X}".
func hcl2Strings(t *testing.T, text []byte) []string {
	t.Helper()
	f, diags := hclsyntax.ParseConfig(text, "x", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("HCL 2 does not parse it: %s\n%s", diags.Error(), text)
	}
	var out []string
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			vars := map[string]cty.Value{}
			for _, tr := range a.Expr.Variables() {
				vars[tr.RootName()] = cty.StringVal("${" + tr.RootName() + "}")
			}
			v, d := a.Expr.Value(&hcl.EvalContext{Variables: vars})
			if d.HasErrors() {
				t.Fatalf("%s: %s", a.Name, d.Error())
			}
			out = append(out, ctyStrings(v)...)
		}
		for _, blk := range b.Blocks {
			walk(blk.Body)
		}
	}
	walk(f.Body.(*hclsyntax.Body))
	return out
}

func ctyStrings(v cty.Value) []string {
	if v.Type() == cty.String {
		return []string{v.AsString()}
	}
	var out []string
	if v.CanIterateElements() {
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, ctyStrings(e)...)
		}
	}
	return out
}

// modelStrings gives every string value of c.
func modelStrings(c *CLIConfig) []string {
	var out []string
	var items func([]Item)
	var value func(Value)
	value = func(v Value) {
		switch v.Kind {
		case String:
			out = append(out, v.Text)
		case kindList:
			for _, e := range v.List {
				value(e)
			}
		case kindObject:
			items(v.Object)
		}
	}
	items = func(list []Item) {
		for _, it := range list {
			value(it.Value)
		}
	}
	items(c.Settings)
	for _, m := range c.Installation.Methods {
		items(m.item().Value.Object)
	}
	return out
}

// TestParseCLIConfig: OpenTofu's documented forms read: dev_overrides with quoted keys, a
// .tfrc.json's credentials, and provider_installation in JSON.
func TestParseCLIConfig(t *testing.T) {
	native := `
plugin_cache_dir = "/cache"
provider_installation {
  dev_overrides {
    "hashicorp/null" = "/src/null"
  }
  filesystem_mirror {
    path    = "/srv/mirror"
    include = ["registry.opentofu.org/*/*"]
  }
  direct {}
}
credentials "app.terraform.io" {
  token = "s3cret"
}
`
	c, err := ParseCLIConfig("native.tfrc", []byte(native))
	if err != nil {
		t.Fatal(err)
	}
	in := c.Installation
	if in == nil || len(in.Methods) != 3 || in.Methods[0].Overrides[0] != (Override{"hashicorp/null", "/src/null"}) || in.Methods[1].Path != "/srv/mirror" || in.Line != 3 {
		t.Fatalf("installation: %+v", in)
	}
	if len(c.Settings) != 2 || c.Settings[1].Name() != `credentials "app.terraform.io"` {
		t.Fatalf("settings: %+v", c.Settings)
	}
	roundTrip(t, c)

	j := `{"credentials": {"app.terraform.io": {"token": "s3cret"}}, "provider_installation": {"dev_overrides": {"hashicorp/null": "/src/null"}, "direct": {}}}`
	c, err = ParseCLIConfig("credentials.tfrc.json", []byte(j))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Settings) != 1 || c.Settings[0].Name() != `credentials "app.terraform.io"` || c.Settings[0].Value.Object[0].Value.Text != "s3cret" {
		t.Fatalf("JSON settings: %+v", c.Settings)
	}
	if c.Installation == nil || len(c.Installation.Methods) != 2 {
		t.Fatalf("JSON installation: %+v", c.Installation)
	}
	roundTrip(t, c)

	for _, bad := range []string{"provider_installation {\n", "provider_installation {}\nprovider_installation {}\n", "provider_installation = 1\n", "{\"x\": [}"} {
		if _, err := ParseCLIConfig("bad.tfrc", []byte(bad)); err == nil || !strings.Contains(err.Error(), "bad.tfrc") {
			t.Errorf("%q: %v, want an error naming the file", bad, err)
		}
	}
}

// TestUserFiles: the files tofu reads, in its order; TF_CLI_CONFIG_FILE alone when set.
func TestUserFiles(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("TF_CLI_CONFIG_FILE", "")
	t.Setenv("TERRAFORM_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	write := func(rel string) string {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := UserFiles("tofu"); got != nil {
		t.Errorf("an empty home: %v", got)
	}
	legacy := write(".terraformrc")
	if got := UserFiles("tofu"); !slices.Equal(got, []string{legacy}) {
		t.Errorf("only ~/.terraformrc: %v", got)
	}
	rc := write(".tofurc")
	b, a := write(".terraform.d/b.tfrc.json"), write(".terraform.d/a.tfrc")
	write(".terraform.d/notes.txt")
	if got, want := UserFiles("tofu"), []string{rc, a, b}; !slices.Equal(got, want) {
		t.Errorf("tofu: %v, want %v", got, want)
	}
	if got, want := UserFiles("/usr/bin/terraform"), []string{legacy, a, b}; !slices.Equal(got, want) {
		t.Errorf("terraform: %v, want %v", got, want)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", rc)
	if got := UserFiles("tofu"); !slices.Equal(got, []string{rc}) {
		t.Errorf("TF_CLI_CONFIG_FILE: %v", got)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", filepath.Join(home, "missing"))
	if got := UserFiles("tofu"); got != nil {
		t.Errorf("a missing TF_CLI_CONFIG_FILE: %v", got)
	}
	t.Setenv("TF_CLI_CONFIG_FILE", "")
	for _, p := range []string{rc, legacy, a, b} {
		os.Remove(p)
	}
	os.RemoveAll(filepath.Join(home, ".terraform.d"))
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	os.MkdirAll(filepath.Join(xdg, "opentofu"), 0o755)
	os.WriteFile(filepath.Join(xdg, "opentofu", "tofurc"), nil, 0o644)
	os.WriteFile(filepath.Join(xdg, "opentofu", "x.tfrc"), nil, 0o644)
	if got, want := UserFiles("tofu"), []string{filepath.Join(xdg, "opentofu", "tofurc"), filepath.Join(xdg, "opentofu", "x.tfrc")}; !slices.Equal(got, want) {
		t.Errorf("XDG_CONFIG_HOME: %v, want %v", got, want)
	}
}

// TestReadCLIConfigs: files merge as tofu merges them; one that cannot be read is an error
// naming it; two provider_installation blocks are refused.
func TestReadCLIConfigs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	main := write("main.tfrc", "plugin_cache_dir = \"/first\"\ncredentials \"a.example\" {\n  token = \"old\"\n}\nprovider_installation {\n  direct {}\n}\n")
	j := write("credentials.tfrc.json", `{"plugin_cache_dir": "/second", "credentials": {"a.example": {"token": "new"}, "b.example": {"token": "b"}}}`)
	c, err := ReadCLIConfigs([]string{main, j})
	if err != nil {
		t.Fatal(err)
	}
	text := c.String()
	for _, want := range []string{`"/first"`, `token = "new"`, `credentials "b.example"`, "direct {"} {
		if !strings.Contains(text, want) {
			t.Errorf("merged configuration lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "/second") || strings.Contains(text, `"old"`) {
		t.Errorf("merged configuration keeps what tofu would not:\n%s", text)
	}
	again := write("again.tfrc", "provider_installation {\n  direct {}\n}\n")
	if _, err := ReadCLIConfigs([]string{main, again}); err == nil || !strings.Contains(err.Error(), again) {
		t.Errorf("two provider_installation blocks: %v", err)
	}
	broken := write("broken.tfrc.json", `{"credentials": {"a.example": {"token": }}}`)
	if _, err := ReadCLIConfigs([]string{main, broken}); err == nil || !strings.Contains(err.Error(), broken) {
		t.Errorf("a broken file: %v", err)
	}
	if _, err := ReadCLIConfigs([]string{dir}); err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("a directory: %v", err)
	}
}
