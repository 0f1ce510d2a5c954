package tofufiles

import (
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestModuleLockRoundTrip(t *testing.T) {
	l := &ModuleLock{Entries: map[string]*ModuleLockEntry{
		"vpc": {Call: "vpc", Source: "example.com/ns/vpc/aws", Version: "1.2.0", Constraints: "~> 1.2",
			Hashes: []string{"zh:ab", "h1:cd"}},
		"vpc.net": {Call: "vpc.net", Source: `git::https://example.com/n.git?ref=v1&x=${y}"q"`, Version: "0123abcd",
			Hashes: []string{"h1:x", "zh:y"}},
	}}
	out := l.Bytes()
	for _, want := range []string{`module "vpc" {`, `source      = "example.com/ns/vpc/aws"`, `constraints = "~> 1.2"`, `"h1:cd",`, `module "vpc.net" {`, `$${y}\"q\"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the lock lacks %q:\n%s", want, out)
		}
	}
	back, diags := ParseModuleLock("l.hcl", out)
	if diags.HasErrors() {
		t.Fatalf("%s\n%s", diags, out)
	}
	for k, e := range l.Entries {
		got := back.Entries[k]
		want := *e
		want.Hashes = append([]string(nil), e.Hashes...)
		sort.Strings(want.Hashes)
		if got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: read back %+v, want %+v", k, got, want)
		}
	}
}

func TestModuleLockRefuses(t *testing.T) {
	for _, src := range []string{
		`provider "x" {}`,
		"module \"a\" {\n source = \"s\"\n}\nmodule \"a\" {\n source = \"s\"\n}\n",
		"module \"a\" {\n hashes = \"h1:x\"\n}\n",
		"x = 1\n",
	} {
		if _, diags := ParseModuleLock("l.hcl", []byte(src)); !diags.HasErrors() {
			t.Errorf("%q parsed", src)
		}
	}
}

// FuzzModuleLock: whatever sources, versions and hashes go in, the module lock reads back the
// same entries.
func FuzzModuleLock(f *testing.F) {
	f.Add("vpc.a", "git::https://h/r.git?ref=${x}", "1.0.0", ">= 1", "h1:a")
	f.Add("a", "%{if}", "\\", "\"", "\n")
	f.Fuzz(func(t *testing.T, call, source, version, constraints, hash string) {
		for _, s := range []string{call, source, version, constraints, hash} {
			if !utf8.ValidString(s) || !norm.NFC.IsNormalString(s) {
				return // HCL reads strings back in normal form C
			}
		}
		if call == "" || strings.ContainsAny(call, "\"\\\n\r$%{}") || strings.ContainsRune(call, 0) {
			return // labels are call keys: identifiers and dots
		}
		e := &ModuleLockEntry{Call: call, Source: source, Version: version, Constraints: constraints, Hashes: []string{hash}}
		l := &ModuleLock{Entries: map[string]*ModuleLockEntry{call: e}}
		back, diags := ParseModuleLock("l.hcl", l.Bytes())
		if diags.HasErrors() {
			t.Fatalf("%s\n%s", diags, l.Bytes())
		}
		got := back.Entries[call]
		if version == "" {
			e.Version = ""
		}
		if got == nil || !reflect.DeepEqual(*got, *e) {
			t.Fatalf("read back %+v, want %+v\n%s", got, e, l.Bytes())
		}
	})
}
