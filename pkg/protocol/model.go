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

// MethodName is an RPC's own name from a gRPC method (/tfplugin6.Provider/PlanResourceChange),
// and the protocol's major version (0 when the service is not a provider's).
func MethodName(full string) (major int, name string) {
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
	major, name := MethodName(full)
	v := Published(major)
	if v == nil {
		return nil, nil
	}
	return v, v.Method(name)
}
