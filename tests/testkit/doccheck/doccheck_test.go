package doccheck

import (
	"reflect"
	"testing"
)

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"The cache: `oprov cache`":                       "the-cache-oprov-cache",
		"`oprov push SRC... REPO`":                       "oprov-push-src-repo",
		"Keyless: publish from CI, verify in an air gap": "keyless-publish-from-ci-verify-in-an-air-gap",
		"With the cosign CLI (v2.6, offline)":            "with-the-cosign-cli-v26-offline",
		"A [link](x.md) and *emphasis*":                  "a-link-and-emphasis",
		"oprov_push":                                     "oprov_push",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	d := Parse("# Title\n\nSee [a](a.md#x) and `[not](a link)`.\n\n## Title\n\n<!-- doctest -->\n```sh\necho [b](c)\n```\n\n- item one\n  goes on\n- item two\n")
	if !reflect.DeepEqual(d.Links, []Link{{Target: "a.md#x", Line: 3}}) {
		t.Errorf("links: %+v", d.Links)
	}
	if !d.Anchors["title"] || !d.Anchors["title-1"] {
		t.Errorf("anchors: %v", d.Anchors)
	}
	if len(d.Blocks) != 1 || d.Blocks[0].Lang != "sh" || d.Blocks[0].Marker != "doctest" || d.Blocks[0].Text != "echo [b](c)\n" {
		t.Errorf("blocks: %+v", d.Blocks)
	}
	var paras []string
	for _, p := range d.Paras {
		paras = append(paras, p.Text)
	}
	want := []string{"See [a](a.md#x) and `[not](a link)`.", "item one goes on", "item two"}
	if !reflect.DeepEqual(paras, want) {
		t.Errorf("paragraphs: %q", paras)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("# a\n```sh\nx\n```\n[l](m)")
	f.Fuzz(func(t *testing.T, s string) { Parse(s) })
}
