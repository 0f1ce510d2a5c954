package recording

import (
	"github.com/oprov/oprov/pkg/protocol"
)

// unmodelledKey is where a decoded message lists the numbers of fields the model does not name
// (their payload is never kept), or, as true, marks a call of a method the model lacks.
const unmodelledKey = "unmodelled"

// modelCalls derives what a recording decodes of every unary method of protocols 5 and 6 from
// pkg/protocol's model: each field's kind from its type, its schema role from its class and
// method, its secrecy from its class. Streams (ListResource, ReadStateBytes, WriteStateBytes,
// InvokeAction) are never recorded and never answered by replay.
func modelCalls() map[string]call {
	out := map[string]call{}
	for _, major := range []int{5, 6} {
		v := protocol.Published(major)
		for _, m := range v.Methods {
			if m.ClientStream || m.ServerStream {
				continue
			}
			out[m.Name] = call{request: modelMessage(v, m.Name, m.Request, protocol.Container, true, map[string]*message{}),
				response: modelMessage(v, m.Name, m.Response, protocol.Container, false, map[string]*message{})}
		}
	}
	return out
}

// comparedClasses are the classes of request fields that make two calls the same: what tofu asks
// about. Meta fields count only by name (a schema version, an import id); capabilities and the
// engine's version do not, so a recording replays across tofu and Terraform.
var comparedClasses = map[protocol.Class]bool{protocol.Name: true, protocol.Config: true, protocol.ProviderConfig: true,
	protocol.State: true, protocol.RawState: true, protocol.FunctionArgument: true, protocol.ListOption: true, protocol.MovedSource: true}

var comparedMeta = map[string]bool{"version": true, "id": true, "source_schema_version": true}

func modelMessage(v *protocol.Version, method, name string, parent protocol.Class, request bool, seen map[string]*message) *message {
	key := name + "\x00" + parent.String()
	if m, ok := seen[key]; ok {
		return m
	}
	pm := v.Message(name)
	out := &message{}
	seen[key] = out
	if pm == nil {
		return out
	}
	for i := range pm.Fields {
		pf := &pm.Fields[i]
		cls := protocol.ClassWithin(parent, name, pf)
		f := field{num: pf.Num, name: pf.Name, repeated: pf.Repeated || pf.Map, class: cls}
		f.merges = !f.repeated && !scalarTypes[pf.Type]
		f.compared = request && (comparedClasses[cls] || cls == protocol.Meta && comparedMeta[pf.Name])
		if pf.Map && cls.Secrecy() != protocol.Whole {
			// A map is, on the wire, a repeated entry message: its key (1) and its value (2),
			// which is decoded by the model as any field of the map's class and value type.
			value := protocol.Field{Name: "value", Num: 2, Type: pf.Type}
			vf := field{num: value.Num, name: value.Name, class: cls, compared: f.compared}
			modelKind(&vf, v, method, &value, cls, request, seen)
			f.kind, f.sub = kMessage, &message{fields: []field{
				{num: 1, name: "key", kind: kString, class: cls, compared: f.compared}, vf}}
		} else {
			modelKind(&f, v, method, pf, cls, request, seen)
		}
		out.fields = append(out.fields, f)
	}
	return out
}

// scalarTypes are the model's field types that are not messages (pkg/protocol.Field.Type).
var scalarTypes = map[string]bool{"string": true, "bytes": true, "bool": true, "int64": true, "int32": true, "uint64": true, "uint32": true, "enum": true}

// modelKind sets how field f, of model field pf and class cls, is held: its kind, its role, the
// message it holds.
func modelKind(f *field, v *protocol.Version, method string, pf *protocol.Field, cls protocol.Class, request bool, seen map[string]*message) {
	sec := cls.Secrecy()
	switch {
	case sec == protocol.Whole:
		f.kind = kSecret
	case pf.Type == "string":
		f.kind = kString
	case pf.Type == "bool":
		f.kind = kBool
	case pf.Type == "int64" || pf.Type == "int32" || pf.Type == "uint64" || pf.Type == "uint32" || pf.Type == "enum":
		f.kind, f.int32 = kInt, pf.Type == "int32" || pf.Type == "enum"
	case pf.Type == "bytes":
		f.kind = kBytes
	case pf.Type == "DynamicValue" && (sec == protocol.BySchema || sec == protocol.AllAttributes):
		f.kind, f.role = kValue, roleOf(method, cls)
	case pf.Type == "RawState" && sec == protocol.BySchema:
		f.kind = kRawState
	case pf.Type == "AttributePath":
		f.kind = kPath
	case sec == protocol.Public && cls != protocol.Container && v.Message(pf.Type) == nil:
		// A message the model takes from elsewhere (a Timestamp) is kept as its bytes.
		f.kind = kBytes
	default:
		// Identity too is decoded by the model (ResourceIdentityData, RawState): its value's
		// bytes are public by the protocol, and a field the model lacks is listed by number.
		f.kind, f.sub = kMessage, modelMessage(v, method, pf.Type, cls, request, seen)
	}
}

// roleOf says which schema describes a configuration or state of a method's messages.
func roleOf(method string, cls protocol.Class) role {
	if cls == protocol.ProviderConfig {
		return roleProvider
	}
	switch method {
	case "ValidateResourceConfig", "ValidateResourceTypeConfig", "UpgradeResourceState", "ReadResource",
		"PlanResourceChange", "ApplyResourceChange", "ImportResourceState", "MoveResourceState", "GenerateResourceConfig":
		return roleResource
	case "ValidateDataResourceConfig", "ValidateDataSourceConfig", "ReadDataSource":
		return roleData
	case "ValidateEphemeralResourceConfig", "OpenEphemeralResource":
		return roleEphemeral
	}
	return roleNone // lists, actions, state stores: no schema a recording decodes, so wholly redacted
}

// Fields replay and the drive write or read themselves, by their names in the model.
var (
	dynamicMsgpack     = protocol.Num("DynamicValue", "msgpack")
	dynamicJSON        = protocol.Num("DynamicValue", "json")
	rawStateJSON       = protocol.Num("RawState", "json")
	rawStateFlatmap    = protocol.Num("RawState", "flatmap")
	upgradeRawState    = protocol.Num("UpgradeResourceState.Request", "raw_state")
	upgradeUpgraded    = protocol.Num("UpgradeResourceState.Response", "upgraded_state")
	readCurrentState   = protocol.Num("ReadResource.Request", "current_state")
	readPrivate        = protocol.Num("ReadResource.Request", "private")
	readNewState       = protocol.Num("ReadResource.Response", "new_state")
	readNewPrivate     = protocol.Num("ReadResource.Response", "private")
	planPrior          = protocol.Num("PlanResourceChange.Request", "prior_state")
	planPriorPrivate   = protocol.Num("PlanResourceChange.Request", "prior_private")
	planPlanned        = protocol.Num("PlanResourceChange.Response", "planned_state")
	planPlannedPrivate = protocol.Num("PlanResourceChange.Response", "planned_private")
	planLegacy         = protocol.Num("PlanResourceChange.Response", "legacy_type_system")
	pathSteps          = protocol.Num("AttributePath", "steps")
	stepAttribute      = protocol.Num("AttributePath.Step", "attribute_name")
	stepKeyString      = protocol.Num("AttributePath.Step", "element_key_string")
	stepKeyInt         = protocol.Num("AttributePath.Step", "element_key_int")
	diagSeverity       = protocol.Num("Diagnostic", "severity")
	diagSummary        = protocol.Num("Diagnostic", "summary")
	diagDetail         = protocol.Num("Diagnostic", "detail")
	diagAttribute      = protocol.Num("Diagnostic", "attribute")
	functionErrorText  = protocol.Num("FunctionError", "text")
	callFunctionError  = protocol.Num("CallFunction.Response", "error")
)
