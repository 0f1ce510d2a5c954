package sign

import (
	"reflect"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/doccheck"
)

// TestReferencePage keeps docs/policy-file.md complete: every block, label and attribute the
// policy parser reads (its gohcl tags) has a row with the right type and required-ness, and no
// row names a field the parser does not read.
func TestReferencePage(t *testing.T) {
	const page = "../../docs/policy-file.md"
	problems, err := doccheck.CheckReferencePage(page, reflect.TypeOf(policyFile{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%s disagrees with the trust policy's parser (pkg/sign):\n%s", page, strings.Join(problems, "\n"))
	}
}
