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
	// PublicKeys, Identities and TrustedRoot are trust given as keys and keyless identities.
	PublicKeys  []string
	Identities  []Identity
	TrustedRoot string
}

// Identity is an identity block of oci_mirror: its attributes by name ("" left out).
type Identity struct {
	Issuer, IssuerRegexp, Subject, SubjectRegexp, Repository, Ref, Trigger string
}

func stringList(items []string) hclwrite.Tokens {
	vals := make([]cty.Value, len(items))
	for i, s := range items {
		vals[i] = cty.StringVal(s)
	}
	if len(vals) == 0 {
		return hclwrite.TokensForValue(cty.ListValEmpty(cty.String))
	}
	return hclwrite.TokensForValue(cty.ListVal(vals))
}

// writeTrust adds the trust attributes and identity blocks of m to body.
func (m OprovMirror) writeTrust(body *hclwrite.Body) {
	if m.Policy != "" {
		body.SetAttributeValue("policy", cty.StringVal(m.Policy))
	}
	if len(m.PublicKeys) > 0 {
		body.SetAttributeRaw("public_keys", stringList(m.PublicKeys))
	}
	if len(m.Identities) > 0 && m.TrustedRoot != "" {
		body.SetAttributeValue("trusted_root", cty.StringVal(m.TrustedRoot))
	}
	for _, id := range m.Identities {
		ib := body.AppendNewBlock("identity", nil).Body()
		for _, a := range [][2]string{{"issuer", id.Issuer}, {"issuer_regexp", id.IssuerRegexp}, {"subject", id.Subject},
			{"subject_regexp", id.SubjectRegexp}, {"repository", id.Repository}, {"ref", id.Ref}, {"trigger", id.Trigger}} {
			if a[1] != "" {
				ib.SetAttributeValue(a[0], cty.StringVal(a[1]))
			}
		}
	}
}

// OprovHCL renders oci_mirror blocks of oprov.hcl with hclwrite: strings escaped as HCL 2 reads
// them, the template written as the template it is; and, when modulePrefix is set, a module_mirror
// block naming where a bundle's modules were loaded.
func OprovHCL(mirrors []OprovMirror, modulePrefix string) string {
	f := hclwrite.NewEmptyFile()
	if modulePrefix != "" {
		f.Body().AppendNewBlock("module_mirror", nil).Body().SetAttributeValue("repository_prefix", cty.StringVal(modulePrefix))
	}
	for _, m := range mirrors {
		body := f.Body().AppendNewBlock("oci_mirror", nil).Body()
		body.SetAttributeRaw("repository_template", hcl2Template(m.RepositoryTemplate))
		body.SetAttributeRaw("include", stringList(m.Include))
		m.writeTrust(body)
	}
	return string(f.Bytes())
}
