package protocol

import (
	"fmt"
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
		if u := unclassedOf(v); len(u) > 0 {
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
	u := unclassedOf(Published(6))
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
	if unclassed.Secrecy() != Whole {
		t.Fatal("an unclassed field is not wholly secret")
	}
}

// TestEveryMethodHasItsSubject: every method that names a thing has its kind and the field
// holding the name, and every unary response with diagnostics says where.
func TestEveryMethodHasItsSubject(t *testing.T) {
	for _, major := range []int{5, 6} {
		v := Published(major)
		for i := range v.Methods {
			m := &v.Methods[i]
			s := v.SubjectOf(m)
			req := v.Message(m.Request)
			named := req.Named("type_name") != nil || req.Named("action_type") != nil || req.Named("name") != nil || req.Named("meta") != nil
			if named && (s.Kind == "" || s.NameField == 0) {
				t.Errorf("%d: %s names a thing but its subject is %+v", major, m.Name, s)
			}
		}
	}
	v := Published(6)
	if s := v.SubjectOf(v.Method("MoveResourceState")); s.NameField != 5 || s.DiagField != 2 || s.Kind != "resource" {
		t.Errorf("MoveResourceState: %+v", s)
	}
	if Num("PlanResourceChange.Request", "prior_private") != 5 {
		t.Error("Num(PlanResourceChange.Request, prior_private) is not 5")
	}
}

// TestCoverageFailsWithAMethodTakenOut: with the classes of one RPC taken out of the model, the
// coverage check names that RPC's every value-carrying field.
func TestCoverageFailsWithAMethodTakenOut(t *testing.T) {
	saved := map[string]Class{}
	for k, c := range byField {
		if strings.HasPrefix(k, "CallFunction.") {
			saved[k] = c
			delete(byField, k)
		}
	}
	defer func() {
		for k, c := range saved {
			byField[k] = c
		}
	}()
	if len(saved) == 0 {
		t.Fatal("CallFunction has no classes to take out")
	}
	u := strings.Join(unclassedOf(Published(6)), "\n")
	for _, want := range []string{"CallFunction: CallFunction.Request.name", "CallFunction: CallFunction.Request.arguments", "CallFunction: CallFunction.Response.result"} {
		if !strings.Contains(u, want) {
			t.Errorf("with CallFunction taken out, the check did not report %s:\n%s", want, u)
		}
	}
}

// unclassedOf lists every field a method of v reaches that has no class, as Method: Message.field;
// a field whose type is a message is followed into that message. The published protocol must
// give an empty list (TestEveryFieldHasAClass).
func unclassedOf(v *Version) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(method, msg string)
	walk = func(method, msg string) {
		if seen[msg] {
			return
		}
		seen[msg] = true
		m := v.Message(msg)
		if m == nil {
			out = append(out, fmt.Sprintf("%s: message %s is not in the model", method, msg))
			return
		}
		for i := range m.Fields {
			f := &m.Fields[i]
			switch classOf(msg, f) {
			case Container:
				walk(method, f.Type)
				continue
			case unclassed:
			default:
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s.%s", method, msg, f.Name))
		}
	}
	for _, m := range v.Methods {
		walk(m.Name, m.Request)
		walk(m.Name, m.Response)
	}
	return out
}
