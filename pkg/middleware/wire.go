// Package middleware sits on the provider protocol, between tofu (or terraform) and a provider,
// through the proxy of pkg/plugin: an audit trail of every call, and policy rules in CEL that
// warn about or deny resource changes. It decodes only what it reads (with protowire, and values
// with go-cty's own codecs against the provider's schema) and passes everything else on as it
// came.
package middleware

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
)

// rpcInfo is what the middleware knows of one provider method: what its request names (the
// field holding a resource type or function name, and which kind of thing that is) and where its
// response keeps diagnostics. Field numbers are the published protocol's (5.10 and 6.10 agree).
type rpcInfo struct {
	kind      string // resource, data_source, ephemeral_resource, list_resource, function, state_store, action
	nameField protowire.Number
	diagField protowire.Number
}

var rpcs = map[string]rpcInfo{
	"GetMetadata": {diagField: 2}, "GetProviderSchema": {diagField: 4}, "GetSchema": {diagField: 4},
	"ValidateProviderConfig": {diagField: 2}, "PrepareProviderConfig": {diagField: 2},
	"ConfigureProvider": {diagField: 1}, "Configure": {diagField: 1}, "GetFunctions": {diagField: 2},
	"GetResourceIdentitySchemas": {diagField: 2}, "MoveResourceState": {"resource", 5, 2},
	"ValidateResourceConfig": {"resource", 1, 1}, "ValidateResourceTypeConfig": {"resource", 1, 1},
	"UpgradeResourceState": {"resource", 1, 2}, "UpgradeResourceIdentity": {"resource", 1, 2},
	"ReadResource": {"resource", 1, 2}, "PlanResourceChange": {"resource", 1, 4},
	"ApplyResourceChange": {"resource", 1, 3}, "ImportResourceState": {"resource", 1, 2},
	"GenerateResourceConfig":     {"resource", 1, 2},
	"ValidateDataResourceConfig": {"data_source", 1, 1}, "ValidateDataSourceConfig": {"data_source", 1, 1},
	"ReadDataSource":                  {"data_source", 1, 2},
	"ValidateEphemeralResourceConfig": {"ephemeral_resource", 1, 1}, "OpenEphemeralResource": {"ephemeral_resource", 1, 1},
	"RenewEphemeralResource": {"ephemeral_resource", 1, 1}, "CloseEphemeralResource": {"ephemeral_resource", 1, 1},
	"ValidateListResourceConfig": {"list_resource", 1, 1},
	"CallFunction":               {kind: "function", nameField: 1},
	"ValidateStateStoreConfig":   {"state_store", 1, 1}, "ConfigureStateStore": {"state_store", 1, 1},
	"LockState": {"state_store", 1, 2}, "UnlockState": {"state_store", 1, 1}, "GetStates": {"state_store", 1, 2},
	"DeleteState": {"state_store", 1, 1}, "PlanAction": {"action", 1, 1}, "ValidateActionConfig": {"action", 1, 1},
}

// Fields of the messages the middleware reads.
const (
	planPriorState       = 2 // PlanResourceChange.Request
	planPlannedState     = 1 // PlanResourceChange.Response
	planRequiresReplace  = 2 // PlanResourceChange.Response
	applyPriorState      = 2 // ApplyResourceChange.Request
	applyPlannedState    = 3 // ApplyResourceChange.Request
	planPriorPrivate     = 5 // PlanResourceChange.Request
	planPriorIdentity    = 8 // PlanResourceChange.Request
	applyPlannedPrivate  = 5 // ApplyResourceChange.Request
	applyPlannedIdentity = 7 // ApplyResourceChange.Request
	applyNewState        = 1 // ApplyResourceChange.Response
	applyNewPrivate      = 2 // ApplyResourceChange.Response
	applyNewIdentity     = 5 // ApplyResourceChange.Response
	callFunctionError    = 2 // CallFunction.Response: FunctionError{text = 1}
	dynamicMsgpack       = 1 // DynamicValue
	dynamicJSON          = 2
	diagSeverity         = 1 // Diagnostic
	diagSummary          = 2
	diagDetail           = 3
)

// Diagnostic severities on the wire.
const (
	severityError   = 1
	severityWarning = 2
)

// varintField gives the last occurrence of a varint field, or 0.
func varintField(msg []byte, num protowire.Number) uint64 {
	var v uint64
	plugin.WireWalk(msg, func(n protowire.Number, typ protowire.Type, value []byte) {
		if n == num && typ == protowire.VarintType {
			v, _ = protowire.ConsumeVarint(value)
		}
	})
	return v
}

// Diagnostic is a diagnostic as the audit records it.
type Diagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
}

// diagnostics reads a response's diagnostics.
func diagnostics(resp []byte, num protowire.Number) []Diagnostic {
	var out []Diagnostic
	for _, d := range plugin.WireFields(resp, num) {
		sev := "invalid"
		switch varintField(d, diagSeverity) {
		case severityError:
			sev = "error"
		case severityWarning:
			sev = "warning"
		}
		out = append(out, Diagnostic{Severity: sev, Summary: string(plugin.WireField(d, diagSummary))})
	}
	return out
}

// appendDiagnostic adds one diagnostic to a response: repeated fields may be appended to a
// message's bytes, so everything the provider said stays as it was.
func appendDiagnostic(resp []byte, num protowire.Number, severity uint64, summary, detail string) []byte {
	var d []byte
	d = protowire.AppendVarint(protowire.AppendTag(d, diagSeverity, protowire.VarintType), severity)
	d = protowire.AppendString(protowire.AppendTag(d, diagSummary, protowire.BytesType), summary)
	d = protowire.AppendString(protowire.AppendTag(d, diagDetail, protowire.BytesType), detail)
	return protowire.AppendBytes(protowire.AppendTag(resp, num, protowire.BytesType), d)
}
