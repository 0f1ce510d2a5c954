package tofufiles

import (
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// OprovMirror is an oci_mirror block of oprov.hcl (HCL 2), for configurations oprov prints.
type OprovMirror struct {
	// RepositoryTemplate is an HCL 2 template's source: its ${namespace} and ${type} kept, its
	// literal parts escaped with TemplateLiteral.
	RepositoryTemplate string
	Include            []string
	// Policy is a trust policy file's path; "" for none.
	Policy string
}

// OprovHCL renders oci_mirror blocks of oprov.hcl with hclwrite: strings escaped as HCL 2 reads
// them, the template written as the template it is.
func OprovHCL(mirrors []OprovMirror) string {
	f := hclwrite.NewEmptyFile()
	for _, m := range mirrors {
		body := f.Body().AppendNewBlock("oci_mirror", nil).Body()
		body.SetAttributeRaw("repository_template", hcl2Template(m.RepositoryTemplate))
		inc := make([]cty.Value, len(m.Include))
		for i, s := range m.Include {
			inc[i] = cty.StringVal(s)
		}
		body.SetAttributeRaw("include", hclwrite.TokensForValue(cty.ListVal(inc)))
		if m.Policy != "" {
			body.SetAttributeValue("policy", cty.StringVal(m.Policy))
		}
	}
	return string(f.Bytes())
}
