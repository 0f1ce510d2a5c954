package protocol

import "testing"

// Attack (latent): Num promises one number per field name for protocols 5 and 6 ("the two agree
// wherever both have a field"), and answers from 6 first. Schema.Attribute disagrees: write_only
// is 10 in protocol 5 and 11 in 6 (where 10 is nested_type). A surface that reads a protocol 5
// schema with Num("Schema.Attribute", "write_only") reads deprecation_message's place instead,
// and a write-only attribute is not secret.
//
// The fix: Num refuses (panics on) a field the two number differently, and numIn reads either.
func TestAttackNumAgreesForBothProtocols(t *testing.T) {
	v5, v6 := Published(5), Published(6)
	differ := 0
	for _, m5 := range v5.Messages {
		m6 := v6.Message(m5.Name)
		if m6 == nil {
			continue
		}
		for _, f := range m5.Fields {
			g := m6.Named(f.Name)
			if g == nil {
				continue
			}
			if numIn(5, m5.Name, f.Name) != f.Num || numIn(6, m5.Name, f.Name) != g.Num {
				t.Errorf("numIn is wrong for %s.%s", m5.Name, f.Name)
			}
			if g.Num == f.Num {
				continue
			}
			differ++
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s.%s is %d in protocol 5 and %d in 6; Num gave one number for both", m5.Name, f.Name, f.Num, g.Num)
					}
				}()
				Num(m5.Name, f.Name)
			}()
		}
	}
	if differ == 0 {
		t.Error("no field numbered differently was found: Schema.Attribute.write_only is 10 in 5 and 11 in 6")
	}
}
