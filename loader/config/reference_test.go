package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/oprov/oprov/internal/doccheck"
)

// TestReferencePage keeps docs/oprov-hcl.md complete: every block, label and attribute the parser
// reads (its gohcl tags) has a row with the right type and required-ness, and no row names a
// field the parser does not read. A new attribute cannot go undocumented.
func TestReferencePage(t *testing.T) {
	const page = "../../docs/oprov-hcl.md"
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := doccheck.ParseReference(string(text))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if problems := doccheck.CheckReference(doccheck.HCLSchema(reflect.TypeOf(configFile{})), ref); len(problems) > 0 {
		t.Errorf("%s disagrees with oprov.hcl's parser (loader/config):\n%s", page, strings.Join(problems, "\n"))
	}
}
