// Package protocol is oprov's one model of the provider plugin protocol, versions 5 and 6: every
// method, every message and field with its number (tables_gen.go, derived from the published
// .proto files by TestTablesMatchPublishedProto), and the class of every field that carries a
// value (classes.go). Audit, policy rules, recording, replay, the sandbox hints and the remote path
// all read it, so that they agree on what a call means and what in it is secret, and none of them
// passes on what the model does not describe as if it understood it.
package protocol

import (
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field is one field of a protocol message.
type Field struct {
	Name string
	Num  protowire.Number
	// Type is a scalar's name (string, bytes, int64, bool, enum) or a message's name inside the
	// protocol's package ("DynamicValue", "PlanResourceChange.Request").
	Type     string
	Repeated bool
	// Map is a map<string, Type>: on the wire a repeated entry message with key 1 and value 2.
	Map bool
}

// Message is a protocol message by its name inside the package.
type Message struct {
	Name   string
	Fields []Field
}

// Method is one RPC of the Provider service.
type Method struct {
	Name                       string
	Request, Response          string // message names
	ClientStream, ServerStream bool
}

// Version is one published protocol: tfplugin5 or tfplugin6 at its newest minor version.
type Version struct {
	Major, Minor int
	Methods      []Method
	Messages     []Message
}

// Published gives the model of major version 5 or 6, or nil.
func Published(major int) *Version {
	for i := range published {
		if published[i].Major == major {
			return &published[i]
		}
	}
	return nil
}

// Method finds a method by its name (PlanResourceChange), or nil.
func (v *Version) Method(name string) *Method {
	for i := range v.Methods {
		if v.Methods[i].Name == name {
			return &v.Methods[i]
		}
	}
	return nil
}

// Message finds a message by its name, or nil.
func (v *Version) Message(name string) *Message {
	for i := range v.Messages {
		if v.Messages[i].Name == name {
			return &v.Messages[i]
		}
	}
	return nil
}

// Field finds a field of m by its number, or nil.
func (m *Message) Field(n protowire.Number) *Field {
	for i := range m.Fields {
		if m.Fields[i].Num == n {
			return &m.Fields[i]
		}
	}
	return nil
}

// Named finds a field of m by its name, or nil.
func (m *Message) Named(name string) *Field {
	for i := range m.Fields {
		if m.Fields[i].Name == name {
			return &m.Fields[i]
		}
	}
	return nil
}

// methodName is an RPC's own name from a gRPC method (/tfplugin6.Provider/PlanResourceChange),
// and the protocol's major version (0 when the service is not a provider's).
func methodName(full string) (major int, name string) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	switch {
	case !ok:
		return 0, full
	case svc == "tfplugin5.Provider":
		return 5, name
	case svc == "tfplugin6.Provider":
		return 6, name
	}
	return 0, name
}

// Lookup gives the method a gRPC method name names, in its protocol's model; nil when the model
// has no such method (a newer protocol's, or not a provider's at all).
func Lookup(full string) (*Version, *Method) {
	major, name := methodName(full)
	v := Published(major)
	if v == nil {
		return nil, nil
	}
	return v, v.Method(name)
}

// Num gives the number of field name of message msg, for callers that read a message the same
// way in both protocols: from protocol 6's model, or 5's for a message only 5 has. It panics on a
// name the model lacks, and on a field the two protocols number differently
// (Schema.Attribute.write_only is 10 in 5 and 11 in 6): such a field is read by its own protocol. Callers
// name fields as constants, and their tests reach every one.
func Num(msg, name string) protowire.Number {
	n5, n6 := numIn(5, msg, name), numIn(6, msg, name)
	switch {
	case n5 != 0 && n6 != 0 && n5 != n6:
		panic("protocol: " + msg + "." + name + " is numbered differently in protocols 5 and 6: read it by its protocol")
	case n6 != 0:
		return n6
	case n5 != 0:
		return n5
	}
	panic("protocol: no field " + msg + "." + name + " in the model")
}

// numIn gives the number of field name of message msg in protocol major, or 0.
func numIn(major int, msg, name string) protowire.Number {
	if v := Published(major); v != nil {
		if m := v.Message(msg); m != nil {
			if f := m.Named(name); f != nil {
				return f.Num
			}
		}
	}
	return 0
}

// Subject is what a method is about: the kind of thing it names and where.
type Subject struct {
	// Kind is resource, data_source, ephemeral_resource, list_resource, function, state_store or
	// action; empty for a method about the provider as a whole.
	Kind string
	// NameField is the request's field holding the thing's name (0 when Kind is empty).
	NameField protowire.Number
	// DiagField is the response's repeated Diagnostic field (0 when it has none).
	DiagField protowire.Number
}

// kinds names each method's subject by the prefix or name of the method.
var kinds = []struct{ method, kind string }{
	{"ValidateResourceConfig", "resource"}, {"ValidateResourceTypeConfig", "resource"}, {"UpgradeResourceState", "resource"},
	{"UpgradeResourceIdentity", "resource"}, {"ReadResource", "resource"}, {"PlanResourceChange", "resource"},
	{"ApplyResourceChange", "resource"}, {"ImportResourceState", "resource"}, {"MoveResourceState", "resource"},
	{"GenerateResourceConfig", "resource"},
	{"ValidateDataResourceConfig", "data_source"}, {"ValidateDataSourceConfig", "data_source"}, {"ReadDataSource", "data_source"},
	{"ValidateEphemeralResourceConfig", "ephemeral_resource"}, {"OpenEphemeralResource", "ephemeral_resource"},
	{"RenewEphemeralResource", "ephemeral_resource"}, {"CloseEphemeralResource", "ephemeral_resource"},
	{"ListResource", "list_resource"}, {"ValidateListResourceConfig", "list_resource"},
	{"CallFunction", "function"},
	{"ValidateStateStoreConfig", "state_store"}, {"ConfigureStateStore", "state_store"}, {"ReadStateBytes", "state_store"},
	{"WriteStateBytes", "state_store"}, {"LockState", "state_store"}, {"UnlockState", "state_store"},
	{"GetStates", "state_store"}, {"DeleteState", "state_store"},
	{"PlanAction", "action"}, {"InvokeAction", "action"}, {"ValidateActionConfig", "action"},
}

// SubjectOf gives what method m of v is about.
func (v *Version) SubjectOf(m *Method) Subject {
	var s Subject
	for _, k := range kinds {
		if k.method == m.Name {
			s.Kind = k.kind
		}
	}
	if req := v.Message(m.Request); req != nil && s.Kind != "" {
		for _, name := range []string{"target_type_name", "type_name", "action_type", "name"} {
			if f := req.Named(name); f != nil && f.Type == "string" {
				s.NameField = f.Num
				break
			}
		}
		if f := req.Named("meta"); s.NameField == 0 && f != nil { // WriteStateBytes: the name is in its meta
			s.NameField = f.Num
		}
	}
	if resp := v.Message(m.Response); resp != nil {
		for _, f := range resp.Fields {
			if f.Type == "Diagnostic" && f.Repeated {
				s.DiagField = f.Num
			}
		}
	}
	return s
}
