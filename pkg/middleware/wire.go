// Package middleware sits on the provider protocol, between tofu (or terraform) and a provider,
// through the proxy of pkg/plugin: an audit trail of every call, and policy rules in CEL that
// warn about or deny resource changes. It decodes only what it reads (with protowire, and values
// with go-cty's own codecs against the provider's schema) and passes everything else on as it
// came.
package middleware

import (
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/protocol"
)

// rpcInfo is what the middleware knows of one provider method: what its request names (the
// field holding a resource type or function name, and which kind of thing that is) and where its
// response keeps diagnostics. All of it is pkg/protocol's model (SubjectOf), for protocols 5 and 6.
type rpcInfo struct {
	kind      string // resource, data_source, ephemeral_resource, list_resource, function, state_store, action
	nameField protowire.Number
	diagField protowire.Number
}

// rpcTable is every method of the published protocols, built on first use.
var rpcTable = sync.OnceValue(func() map[string]rpcInfo {
	out := map[string]rpcInfo{}
	for _, major := range []int{5, 6} {
		v := protocol.Published(major)
		for i := range v.Methods {
			s := v.SubjectOf(&v.Methods[i])
			out[v.Methods[i].Name] = rpcInfo{kind: s.Kind, nameField: s.NameField, diagField: s.DiagField}
		}
	}
	return out
})

// diagOf gives where a method's response keeps its diagnostics (0: it has none).
func diagOf(name string) protowire.Number {
	info, _ := rpcOf(name)
	return info.diagField
}

// rpcOf gives what the model says of a method; known is false for one it lacks.
func rpcOf(name string) (info rpcInfo, known bool) {
	info, known = rpcTable()[name]
	return info, known
}

// Fields of the messages the middleware reads, by their names in the model.
var (
	planPriorState       = protocol.Num("PlanResourceChange.Request", "prior_state")
	planPlannedState     = protocol.Num("PlanResourceChange.Response", "planned_state")
	planRequiresReplace  = protocol.Num("PlanResourceChange.Response", "requires_replace")
	applyPriorState      = protocol.Num("ApplyResourceChange.Request", "prior_state")
	applyPlannedState    = protocol.Num("ApplyResourceChange.Request", "planned_state")
	planPriorPrivate     = protocol.Num("PlanResourceChange.Request", "prior_private")
	planPriorIdentity    = protocol.Num("PlanResourceChange.Request", "prior_identity")
	applyPlannedPrivate  = protocol.Num("ApplyResourceChange.Request", "planned_private")
	applyPlannedIdentity = protocol.Num("ApplyResourceChange.Request", "planned_identity")
	applyNewState        = protocol.Num("ApplyResourceChange.Response", "new_state")
	applyNewPrivate      = protocol.Num("ApplyResourceChange.Response", "private")
	applyNewIdentity     = protocol.Num("ApplyResourceChange.Response", "new_identity")
	callFunctionError    = protocol.Num("CallFunction.Response", "error")
	dynamicMsgpack       = protocol.Num("DynamicValue", "msgpack")
	dynamicJSON          = protocol.Num("DynamicValue", "json")
	diagSeverity         = protocol.Num("Diagnostic", "severity")
	diagSummary          = protocol.Num("Diagnostic", "summary")
	diagDetail           = protocol.Num("Diagnostic", "detail")
	functionErrorText    = protocol.Num("FunctionError", "text")
	readDataConfig       = protocol.Num("ReadDataSource.Request", "config")
	openEphemeralConfig  = protocol.Num("OpenEphemeralResource.Request", "config")
	invokeActionType     = protocol.Num("InvokeAction.Request", "action_type")
	writeStateMeta       = protocol.Num("WriteStateBytes.RequestChunk", "meta")
	chunkMetaType        = protocol.Num("RequestChunkMeta", "type_name")
	importedResources    = protocol.Num("ImportResourceState.Response", "imported_resources")
	importedType         = protocol.Num("ImportResourceState.ImportedResource", "type_name")
	importedState        = protocol.Num("ImportResourceState.ImportedResource", "state")
	moveSourceProvider   = protocol.Num("MoveResourceState.Request", "source_provider_address")
	moveSourceType       = protocol.Num("MoveResourceState.Request", "source_type_name")
	moveSourceState      = protocol.Num("MoveResourceState.Request", "source_state")
	moveTargetState      = protocol.Num("MoveResourceState.Response", "target_state")
	rawStateJSON         = protocol.Num("RawState", "json")
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
