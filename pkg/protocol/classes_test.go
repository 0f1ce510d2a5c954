package protocol

import (
	"strings"
	"testing"
)

// TestEveryFieldHasAClass: every field every published method reaches, in protocols 5 and 6,
// has a class, so no surface meets a value the model does not say how to treat.
func TestEveryFieldHasAClass(t *testing.T) {
	for _, major := range []int{5, 6} {
		v := Published(major)
		if v == nil || len(v.Methods) == 0 {
			t.Fatalf("no model of protocol %d", major)
		}
		if u := v.Unclassed(); len(u) > 0 {
			t.Errorf("protocol %d.%d: fields with no class:\n%s", v.Major, v.Minor, strings.Join(u, "\n"))
		}
	}
}

// TestCoverageFailsWithoutAClass shows the coverage check failing when a value-carrying field
// of a method is taken out of the model.
func TestCoverageFailsWithoutAClass(t *testing.T) {
	const key = "PlanResourceChange.Request.prior_private"
	c := byField[key]
	delete(byField, key)
	defer func() { byField[key] = c }()
	u := Published(6).Unclassed()
	if len(u) != 1 || u[0] != "PlanResourceChange: "+key {
		t.Fatalf("with %s taken out, the check reported %q", key, u)
	}
}

// TestUnknownMethodIsNotModelled: a method of a newer protocol, or of another service, has no
// model, and what has no class is wholly secret.
func TestUnknownMethodIsNotModelled(t *testing.T) {
	if _, m := Lookup("/tfplugin6.Provider/SomethingNew"); m != nil {
		t.Fatal("a method the published protocol lacks was found")
	}
	if _, m := Lookup("/tfplugin6.Provider/PlanResourceChange"); m == nil {
		t.Fatal("PlanResourceChange is not modelled")
	}
	if _, m := Lookup("/plugin.GRPCStdio/StreamStdio"); m != nil {
		t.Fatal("another service's method was taken for a provider's")
	}
	if Unclassed.Secrecy() != Whole {
		t.Fatal("an unclassed field is not wholly secret")
	}
}
