package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyTextNamesTheTrustRule: verify's success output says which key signed and under which
// rule of which policy, in which mode.
func TestVerifyTextNamesTheTrustRule(t *testing.T) {
	repo, _ := pushedLayout(t)
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, false)
	policy := filepath.Join(t.TempDir(), "policy.hcl")
	src := "trust \"acme\" {\n  repositories = [\"**\"]\n  keys = [\"" + pub + "\"]\n}\n"
	if err := os.WriteFile(policy, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, out, _ := testIO()
	if err := runVerify(context.Background(), &verifyOptions{io: ios, Ref: repo + ":1.0.0", Policy: policy, output: textOut}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`trusted by rule "acme" of ` + policy + " (mode enforce)", ") by " + pub} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verify output does not say %q:\n%s", want, out)
		}
	}
}

// TestLoadSaysWhatItChecked: without --key or --policy, load says that no signature was checked.
func TestLoadSaysWhatItChecked(t *testing.T) {
	for _, tc := range []struct {
		o    loadOptions
		want string
	}{
		{loadOptions{}, "Not checked: signatures (give --policy FILE or --key KEY.pub to require them)."},
		{loadOptions{Keys: []string{"a.pub", "b.pub"}}, "every version's signature, by one of a.pub, b.pub."},
		{loadOptions{Policy: "p.hcl"}, "every version's signature under the policy p.hcl"},
	} {
		if got := loadChecks(&tc.o); !strings.HasPrefix(got, "Checked: every blob against its digest") || !strings.Contains(got, tc.want) {
			t.Errorf("loadChecks(%+v) = %q, want it to say %q", tc.o, got, tc.want)
		}
	}
}
