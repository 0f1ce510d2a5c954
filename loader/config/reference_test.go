package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/doccheck"
)

// TestReferencePage keeps docs/oprov-hcl.md complete: every block, label and attribute the parser
// reads (its gohcl tags) has a row with the right type and required-ness, and no row names a
// field the parser does not read. A new attribute cannot go undocumented.
func TestReferencePage(t *testing.T) {
	const page = "../../docs/oprov-hcl.md"
	problems, err := doccheck.CheckReferencePage(page, reflect.TypeOf(configFile{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%s disagrees with oprov.hcl's parser (loader/config):\n%s", page, strings.Join(problems, "\n"))
	}
}
