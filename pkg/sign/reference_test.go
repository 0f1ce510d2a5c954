package sign

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/oprov/oprov/internal/doccheck"
)

// TestReferencePage keeps docs/policy-file.md complete: every block, label and attribute the
// policy parser reads (its gohcl tags) has a row with the right type and required-ness, and no
// row names a field the parser does not read.
func TestReferencePage(t *testing.T) {
	const page = "../../docs/policy-file.md"
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := doccheck.ParseReference(string(text))
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	if problems := doccheck.CheckReference(doccheck.HCLSchema(reflect.TypeOf(policyFile{})), ref); len(problems) > 0 {
		t.Errorf("%s disagrees with the trust policy's parser (pkg/sign):\n%s", page, strings.Join(problems, "\n"))
	}
}
