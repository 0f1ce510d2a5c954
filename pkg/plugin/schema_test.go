package plugin

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/plugin/tfplugin5"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

// write_only reaches the JSON document in both protocols, as 'tofu providers schema -json'
// writes it, and only on the attributes that have it.
func TestSchemaCarriesWriteOnly(t *testing.T) {
	s6 := schema6(&tfplugin6.Schema{Block: &tfplugin6.Schema_Block{Attributes: []*tfplugin6.Schema_Attribute{
		{Name: "password", Type: []byte(`"string"`), Optional: true, WriteOnly: true},
		{Name: "name", Type: []byte(`"string"`), Required: true},
	}}})
	s5 := schema5(&tfplugin5.Schema{Block: &tfplugin5.Schema_Block{Attributes: []*tfplugin5.Schema_Attribute{
		{Name: "password", Type: []byte(`"string"`), Optional: true, WriteOnly: true},
		{Name: "name", Type: []byte(`"string"`), Required: true},
	}}})
	for name, s := range map[string]*Schema{"protocol 6": s6, "protocol 5": s5} {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(data)
		if !strings.Contains(doc, `"password":{"type":"string","description_kind":"plain","optional":true,"write_only":true}`) {
			t.Errorf("%s: write_only lost: %s", name, doc)
		}
		if strings.Count(doc, "write_only") != 1 {
			t.Errorf("%s: write_only on the wrong attributes: %s", name, doc)
		}
	}
}
