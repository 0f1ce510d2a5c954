package recording

import "testing"

// The specs derived from the protocol model decode each field as the recording format says:
// names and texts as strings, flags and numbers as such, values by their schema, diagnostics and
// imported resources as messages of their own fields, private state as a secret, identity and
// map entries ({key, value}) as messages the model decodes.
func TestModelledSpecs(t *testing.T) {
	for _, tc := range []struct {
		rpc      string
		response bool
		path     []string
		kind     kind
		compared bool
	}{
		{"PlanResourceChange", false, []string{"type_name"}, kString, true},
		{"PlanResourceChange", false, []string{"config"}, kValue, true},
		{"PlanResourceChange", false, []string{"prior_private"}, kSecret, false},
		{"PlanResourceChange", false, []string{"client_capabilities"}, kMessage, false},
		{"PlanResourceChange", true, []string{"requires_replace"}, kPath, false},
		{"PlanResourceChange", true, []string{"legacy_type_system"}, kBool, false},
		{"PlanResourceChange", true, []string{"diagnostics", "severity"}, kInt, false},
		{"PlanResourceChange", true, []string{"diagnostics", "summary"}, kString, false},
		{"PlanResourceChange", true, []string{"diagnostics", "attribute"}, kPath, false},
		{"ImportResourceState", true, []string{"imported_resources", "state"}, kValue, false},
		{"ImportResourceState", true, []string{"imported_resources", "type_name"}, kString, false},
		{"ImportResourceState", true, []string{"imported_resources", "private"}, kSecret, false},
		{"ImportResourceState", false, []string{"id"}, kString, true},
		{"UpgradeResourceState", false, []string{"version"}, kInt, true},
		{"UpgradeResourceState", false, []string{"raw_state"}, kRawState, true},
		{"CallFunction", false, []string{"arguments"}, kSecret, true},
		{"CallFunction", true, []string{"error", "text"}, kString, false},
		{"CallFunction", true, []string{"error", "function_argument"}, kInt, false},
		{"OpenEphemeralResource", true, []string{"result"}, kSecret, false},
		{"OpenEphemeralResource", true, []string{"renew_at"}, kBytes, false},
		{"MoveResourceState", false, []string{"source_state"}, kSecret, true},
		{"ReadResource", true, []string{"new_identity"}, kMessage, false},
		{"ReadResource", true, []string{"new_identity", "identity_data"}, kMessage, false},
		{"ReadResource", true, []string{"new_identity", "identity_data", "msgpack"}, kBytes, false},
		{"ReadResource", true, []string{"new_identity", "identity_data", "json"}, kBytes, false},
		{"UpgradeResourceIdentity", false, []string{"raw_identity", "json"}, kBytes, false},
		{"UpgradeResourceIdentity", false, []string{"raw_identity", "flatmap"}, kMessage, false},
		{"UpgradeResourceIdentity", false, []string{"raw_identity", "flatmap", "key"}, kString, false},
		{"UpgradeResourceIdentity", false, []string{"raw_identity", "flatmap", "value"}, kString, false},
		{"GetFunctions", true, []string{"functions"}, kMessage, false},
		{"GetFunctions", true, []string{"functions", "key"}, kString, false},
		{"GetFunctions", true, []string{"functions", "value", "parameters", "type"}, kBytes, false},
		{"GetFunctions", true, []string{"functions", "value", "summary"}, kString, false},
		{"GetResourceIdentitySchemas", true, []string{"identity_schemas", "value", "identity_attributes", "name"}, kString, false},
		{"ConfigureProvider", false, []string{"terraform_version"}, kString, false},
		{"StopProvider", true, []string{"Error"}, kString, false},
		{"Stop", true, []string{"Error"}, kString, false},
	} {
		c, ok := callSpecs()[tc.rpc]
		if !ok {
			t.Errorf("%s is not modelled", tc.rpc)
			continue
		}
		m := c.request
		if tc.response {
			m = c.response
		}
		var f *field
		for i, name := range tc.path {
			if f = m.byName(name); f == nil {
				t.Fatalf("%s %v: no field %s", tc.rpc, tc.path, name)
			}
			if i < len(tc.path)-1 {
				m = f.sub
			}
		}
		if f.kind != tc.kind || f.compared != tc.compared {
			t.Errorf("%s %v: kind %d compared %v, want kind %d compared %v", tc.rpc, tc.path, f.kind, f.compared, tc.kind, tc.compared)
		}
	}
	for _, streaming := range []string{"ListResource", "ReadStateBytes", "WriteStateBytes", "InvokeAction"} {
		if _, ok := callSpecs()[streaming]; ok {
			t.Errorf("%s streams, but a recording decodes it", streaming)
		}
	}
}
