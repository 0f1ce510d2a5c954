package doccheck

import (
	"reflect"
	"strings"
	"testing"
)

type refInner struct {
	Name string `hcl:"name,label"`
	Keys []int  `hcl:"keys,optional"`
}

type refFile struct {
	Path  string     `hcl:"path"`
	On    *bool      `hcl:"on,optional"`
	Inner []refInner `hcl:"inner,block"`
}

const refPage = "# x\n\n## Top\n\n| Name | Type | Default | Meaning |\n|---|---|---|---|\n" +
	"| `path` | string | required | where |\n| `on` | bool | `false` | whether |\n| `inner` | block, repeatable | none | more |\n\n" +
	"## `inner`\n\n| Name | Type | Default | Meaning |\n|---|---|---|---|\n| `name` | label | required | its name |\n| `keys` | list(number) | `[]` | numbers |\n"

func TestCheckReference(t *testing.T) {
	schema := hclSchema(reflect.TypeOf(refFile{}))
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"complete", "", "", ""},
		{"missing row", "| `on` | bool | `false` | whether |\n", "", "on (attribute) is read by the parser but not documented"},
		{"wrong type", "list(number)", "list(string)", `inner.keys: the Type cell says "list(string)"; the parser takes list(number)`},
		{"optional marked required", "| `on` | bool | `false`", "| `on` | bool | required", "on: the Default cell says \"required\", but the parser has it required=false"},
		{"stale row", "| `keys` |", "| `key` |", "inner.key is documented but the parser reads no such field"},
		{"empty meaning", "| where |", "|  |", "path: the Meaning cell is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := refPage
			if tc.from != "" {
				page = strings.Replace(page, tc.from, tc.to, 1)
			}
			ref, err := parseReference(page)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(checkReference(schema, ref), "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
