package config

import (
	"path/filepath"
	"strings"
	"testing"
)

const ruleBase = `provider "example.com/acme/hello" {
  source = "./hello"
}
`

func TestParseAuditAndRules(t *testing.T) {
	cfg, err := parseConfig("/cfg/oprov.hcl", []byte(ruleBase+`
audit {
  path   = "logs/audit.jsonl"
  values = true
}
rule "keep-databases" {
  deny    = "resource.type == 'acme_database' && action == 'delete'"
  message = "never by automation"
}
rule "replace" {
  warn = "action == 'replace'"
}
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Audit == nil || cfg.Audit.Path != filepath.FromSlash("/cfg/logs/audit.jsonl") || !cfg.Audit.Values {
		t.Errorf("audit %+v", cfg.Audit)
	}
	if len(cfg.Rules) != 2 || cfg.Rules[0].Effect != "deny" || cfg.Rules[0].Message != "never by automation" || cfg.Rules[1].Effect != "warn" {
		t.Errorf("rules %+v", cfg.Rules)
	}
}

// A rule that does not compile is an error at the line of its expression in oprov.hcl.
func TestBadRulesPointAtTheLine(t *testing.T) {
	cases := map[string]string{
		"rule \"r\" {\n  deny = \"action ==\"\n}\n":                                "oprov.hcl:5: rule \"r\": ",
		"rule \"r\" {\n\n  warn = \"action == 1\"\n}\n":                            "oprov.hcl:6: rule \"r\": ",
		"rule \"r\" {\n  deny = \"true\"\n  warn = \"true\"\n}\n":                  "not both",
		"rule \"r\" {\n  message = \"x\"\n}\n":                                     "give deny",
		"rule \"r\" {\n  deny = \"true\"\n}\nrule \"r\" {\n  deny = \"true\"\n}\n": "declared twice",
		"audit {\n  path = \"\"\n}\n":                                              "audit: path is empty",
	}
	for body, want := range cases {
		_, err := parseConfig("oprov.hcl", []byte(ruleBase+body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", body, err, want)
		}
	}
}
