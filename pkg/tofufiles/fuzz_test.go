package tofufiles

import (
	"bytes"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// FuzzCLIConfig: whatever paths, URLs and addresses go in, HCL 1 (OpenTofu's reader) reads back
// the same configuration, and without quoted keys HCL 2 (hclparse) parses it and reads the same
// strings.
func FuzzCLIConfig(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, "example.com/acme/hello", "https://m.example/v1/")
	}
	f.Add(`\u0024{x}`, `"q"`, "\\")
	f.Fuzz(func(t *testing.T, path, addr, url string) {
		c := full(path)
		c.Installation.Methods[0].Overrides[1].Provider = addr
		c.Installation.Methods[2].URL = url
		c.Settings[1] = block([]string{"credentials", "app.terraform.io"}, attr("token", str(addr)))
		if !validUTF8(path, addr, url) {
			if _, err := c.Bytes(); err == nil {
				t.Fatal("a string that is not UTF-8 was written")
			}
			return
		}
		roundTrip(t, c)
		c.Installation.Methods = c.Installation.Methods[1:]
		c.Settings[2] = block([]string{"host", "example.com"})
		text, err := c.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if _, diags := hclparse.NewParser().ParseHCL(text, "x.tfrc"); diags.HasErrors() {
			t.Fatalf("hclparse: %s\n%s", diags.Error(), text)
		}
		got, want := hcl2Strings(t, text), modelStrings(c)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("HCL 2 reads %q\nwant %q\ntext:\n%s", got, want, text)
		}
	})
}

// FuzzLockFile: whatever address, version, constraints and hash go in, hclparse reads the lock
// back with the same entry, and an unknown block and another provider's block stay byte for
// byte.
func FuzzLockFile(f *testing.F) {
	for _, s := range awkward {
		f.Add("example.com/"+s+"/x", "1.0.0"+s, ">= 1.0, "+s, "h1:"+s)
	}
	f.Fuzz(func(t *testing.T, addr, version, constraints, hash string) {
		const kept = "provider \"example.com/other/kept\" {\n  version = \"0.1.0\" # mine\n  hashes  = [\"zh:00\"]\n}"
		const unknown = "module \"x\" {\n  anything = \"${goes}\"\n}"
		src := "# comment\n" + kept + "\n\n" + unknown + "\n"
		l, diags := ParseLock("lock", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		if addr == "example.com/other/kept" {
			return
		}
		l.Set(&LockEntry{Addr: addr, Version: version, Constraints: constraints, Hashes: []string{hash, "zh:ff"}})
		out := l.Bytes()
		if !bytes.HasPrefix(out, []byte(src)) {
			t.Fatalf("what oprov did not set changed:\n%s", out)
		}
		if _, diags := hclparse.NewParser().ParseHCL(out, "lock"); diags.HasErrors() {
			t.Fatalf("hclparse: %s\n%s", diags.Error(), out)
		}
		back, diags := ParseLock("lock", out)
		if diags.HasErrors() {
			t.Fatalf("read back: %s\n%s", diags.Error(), out)
		}
		want := &LockEntry{Addr: addr, Version: version, Hashes: l.Entries[addr].Hashes}
		if constraints != "" {
			want.Constraints = NormalizeConstraints(constraints)
		}
		if got := back.Entries[addr]; !validUTF8(addr, version, constraints, hash) {
			return // HCL 2 reads a string that is not UTF-8 as U+FFFD
		} else if !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %+v, want %+v\n%s", got, want, out)
		}
		if len(back.Entries) != 2 {
			t.Fatalf("entries: %v", back.Entries)
		}
	})
}

// validUTF8 says whether every string is UTF-8 on its own (pieces that are not can join into
// one that is).
func validUTF8(s ...string) bool {
	for _, x := range s {
		if !utf8.ValidString(x) {
			return false
		}
	}
	return true
}

// TestLockUnknownBlocksKept: blocks other than provider, and comments, are kept as they were
// when an entry is set in place and when one is added; the file hclparse reads.
func TestLockUnknownBlocksKept(t *testing.T) {
	src := "# top\nmodule \"m\" {\n  x = 1 # note\n}\n\nprovider \"example.com/a/b\" {\n  version = \"1.0.0\"\n  hashes = [\"h1:old=\"]\n}\n"
	l, diags := ParseLock("lock", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	l.Set(&LockEntry{Addr: "example.com/a/b", Version: "1.1.0", Hashes: []string{"h1:new="}})
	l.Set(&LockEntry{Addr: "example.com/a/c", Version: "2.0.0", Constraints: "~> 2.0", Hashes: []string{"h1:c="}})
	out := string(l.Bytes())
	if !strings.HasPrefix(out, "# top\nmodule \"m\" {\n  x = 1 # note\n}\n\nprovider \"example.com/a/b\" {\n  version = \"1.1.0\"\n  hashes = [\n    \"h1:new=\",\n  ]\n}\n") {
		t.Errorf("lock:\n%s", out)
	}
	if !strings.Contains(out, "provider \"example.com/a/c\" {\n  version     = \"2.0.0\"\n  constraints = \"~> 2.0\"\n") {
		t.Errorf("added entry:\n%s", out)
	}
	if _, diags := hclparse.NewParser().ParseHCL([]byte(out), "lock"); diags.HasErrors() {
		t.Error(diags.Error())
	}
	var _ hcl.Diagnostics = diags
}
