// Package recording records the provider calls of a tofu or terraform run and replays them:
// a line-oriented JSON file (docs/recording-format.md) written by a middleware on oprov's proxy,
// and a stand-in that answers every call from it with no provider process.
package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"google.golang.org/grpc/codes"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/protocol"
)

// formatVersion is the version of the recording format this oprov writes and reads.
const formatVersion = 2

// Line is one line of a recording: the header (first), a provider, or a call.
type Line struct {
	// The header.
	Format  int    `json:"oprov_recording,omitempty"`
	Program string `json:"program,omitempty"` // e.g. "tofu 1.12.0"
	Created string `json:"created,omitempty"`
	KeyID   string `json:"key_id,omitempty"` // the recording key's ID (digest.go)
	// A provider, or the provider a call went to.
	Provider string `json:"provider,omitempty"`
	// A provider.
	Version    string                 `json:"version,omitempty"`
	H1         string                 `json:"h1,omitempty"`
	Protocol   int                    `json:"protocol,omitempty"`
	Schema     *plugin.ProviderSchema `json:"schema,omitempty"`
	SchemaWire []byte                 `json:"schema_wire,omitempty"`
	// ServerCapabilities are the capabilities schema_wire gives tofu, by their names in the
	// protocol (those that are true): schema_wire holds nothing this line does not show.
	ServerCapabilities map[string]bool `json:"server_capabilities,omitempty"`
	ConfigKept         bool            `json:"config_kept,omitempty"`
	// FunctionResultsKept: the provider functions' results are in the recording (--record-function-results).
	FunctionResultsKept bool `json:"function_results_kept,omitempty"`
	// A call.
	Call     string     `json:"call,omitempty"`
	Type     string     `json:"type,omitempty"`
	Request  Msg        `json:"request,omitzero"`
	Response Msg        `json:"response,omitzero"`
	Error    *CallError `json:"error,omitempty"`
}

// CallError is a call that ended with a gRPC error instead of a response.
type CallError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Recording is a recording as read: its header, providers by address and calls in order.
type Recording struct {
	Header    Line
	Providers map[string]*ProviderRec
	Order     []string // provider addresses as they appear
	key       *Key     // what replay digests live secrets with (Unlock)
}

// ProviderRec is one provider of a recording and its calls.
type ProviderRec struct {
	Line    Line
	LineNo  int
	schemas *schemas
	Calls   []*CallRec
}

// CallRec is one recorded call.
type CallRec struct {
	LineNo int
	Line   Line
}

// maxProviders bounds the providers a recording declares: replay starts a stand-in for each and
// names them all to tofu in one environment variable (TF_REATTACH_PROVIDERS, which Linux caps at
// 128 KiB), and no configuration uses this many.
const maxProviders = 200

func Read(r io.Reader, name string, limits Limits) (*Recording, error) {
	limits = limits.withDefaults()
	sc := bufio.NewScanner(&boundedReader{r: r, left: limits.MaxBytes})
	sc.Buffer(make([]byte, 0, min(64<<10, limits.MaxLine+1)), limits.MaxLine+1) // the line and its newline
	rec := &Recording{Providers: map[string]*ProviderRec{}}
	n, ncalls := 0, 0
	for sc.Scan() {
		n++
		text := sc.Bytes()
		if len(bytes.TrimSpace(text)) == 0 {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("recording %s, line %d: %s", name, n, quoted(fmt.Sprintf(format, a...)))
		}
		if err := checkJSONBounds(text); err != nil {
			return nil, bad("%v", err)
		}
		var l Line
		if err := decodeJSON(text, &l); err != nil {
			if n == 1 {
				return nil, bad("not an oprov recording (%v): make one with oprov run --record FILE -- tofu apply", err)
			}
			return nil, bad("not a JSON object (%v); was the file cut short or edited?", err)
		}
		if err := checkNames(&l); err != nil {
			return nil, bad("%v", err)
		}
		switch {
		case n == 1 && l.Format == 0:
			return nil, bad("not an oprov recording: the first line has no \"oprov_recording\" header; make one with oprov run --record FILE -- tofu apply")
		case l.Format != 0 && n != 1:
			return nil, bad("a second header: recordings cannot be joined by concatenation")
		case l.Format != 0:
			if l.Format != formatVersion {
				return nil, bad("format version %d; this oprov reads version %d: record again with this oprov", l.Format, formatVersion)
			}
			rec.Header = l
		case l.Call != "":
			p := rec.Providers[l.Provider]
			if p == nil {
				return nil, bad("a call to provider %q, which no earlier line declares", l.Provider)
			}
			if ncalls++; ncalls > limits.MaxCalls {
				return nil, fmt.Errorf("recording %s, line %d: %w", name, n, &oci.LimitError{
					What:    fmt.Sprintf("more than %d calls", limits.MaxCalls),
					Limit:   fmt.Sprintf("the %s of %d", SettingMaxRecordingCalls, limits.MaxCalls),
					Setting: SettingMaxRecordingCalls,
				})
			}
			if err := p.check(&l); err != nil {
				return nil, bad("%s of %s: %v", l.Call, l.Type, err)
			}
			p.Calls = append(p.Calls, &CallRec{LineNo: n, Line: l})
		case l.Provider != "":
			if err := rec.declare(l, n); err != nil {
				return nil, bad("%v", err)
			}
		default:
			return nil, bad("neither a header, a provider nor a call")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, scanError(name, n+1, limits, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("recording %s is empty: make one with oprov run --record FILE -- tofu apply", name)
	}
	if len(rec.Providers) == 0 {
		return nil, fmt.Errorf("recording %s holds no provider: was it cut short?", name)
	}
	return rec, nil
}

// scanError says why reading a recording stopped at line n: a limit passed (naming its setting),
// or the reader's own error.
func scanError(name string, n int, limits Limits, err error) error {
	switch {
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("recording %s, line %d: %w", name, n, &oci.LimitError{
			What:    "a line longer than " + oci.FormatSize(int64(limits.MaxLine)),
			Limit:   "the " + string(SettingMaxRecordingLine) + " of " + oci.FormatSize(int64(limits.MaxLine)),
			Setting: SettingMaxRecordingLine,
		})
	case errors.Is(err, errTooBig):
		return fmt.Errorf("recording %s, line %d: %w", name, n, &oci.LimitError{
			What:    "the file is larger than " + oci.FormatSize(limits.MaxBytes),
			Limit:   "the " + string(SettingMaxRecordingBytes) + " of " + oci.FormatSize(limits.MaxBytes),
			Setting: SettingMaxRecordingBytes,
		})
	}
	return fmt.Errorf("recording %s: %w", name, err)
}

// checkNames makes sure the names a line holds can be named in a message as they are.
func checkNames(l *Line) error {
	for _, f := range []struct{ what, s string }{{"provider address", l.Provider}, {"call name", l.Call}, {"type name", l.Type}} {
		if err := checkName(f.what, f.s); err != nil {
			return err
		}
	}
	return nil
}

// declare adds the provider line l (line n) to rec: at most maxProviders, each once, speaking
// protocol 5 or 6, with one schema in its two forms.
func (rec *Recording) declare(l Line, n int) error {
	if rec.Providers[l.Provider] != nil {
		return fmt.Errorf("provider %s is declared twice", l.Provider)
	}
	if len(rec.Providers) == maxProviders {
		return fmt.Errorf("a recording declares at most %d providers (maxProviders); record a configuration with fewer", maxProviders)
	}
	if l.Protocol != 5 && l.Protocol != 6 {
		return fmt.Errorf("provider %s speaks protocol %d; a recording holds protocol 5 or 6", l.Provider, l.Protocol)
	}
	if len(l.SchemaWire) == 0 || l.Schema == nil {
		return fmt.Errorf("provider %s has no schema (schema and schema_wire)", l.Provider)
	}
	// Replay sends tofu schema_wire; values are checked against schema: they must be one.
	if err := sameSchema(l.Protocol, l.SchemaWire, l.Schema); err != nil {
		return fmt.Errorf("provider %s: %v", l.Provider, err)
	}
	if err := shownWire(l.Protocol, l.SchemaWire, l.ServerCapabilities); err != nil {
		return fmt.Errorf("provider %s: %v", l.Provider, err)
	}
	s, err := newSchemas(l.Schema)
	if err != nil {
		return fmt.Errorf("provider %s: %v", l.Provider, err)
	}
	s.keepConfig = l.ConfigKept
	s.keepFunctionResults = l.FunctionResultsKept
	rec.Providers[l.Provider] = &ProviderRec{Line: l, LineNo: n, schemas: s}
	rec.Order = append(rec.Order, l.Provider)
	return nil
}

// check makes sure a recorded call can be compared and answered: its messages have the fields
// the format knows for the call, with values of the schema's types.
func (p *ProviderRec) check(l *Line) error {
	if l.Error != nil {
		if l.Response != nil {
			return errors.New("both a response and an error")
		}
		if c := codeOf(l.Error.Code); c == codes.OK || c.String() != l.Error.Code {
			return fmt.Errorf("an error whose code is %s: a failed call has a gRPC code other than OK (such as Unavailable)", quoted(l.Error.Code))
		}
		return nil
	}
	if l.Response == nil {
		return errors.New("no response and no error")
	}
	spec, ok := callSpecs()[l.Call]
	var req, resp *message
	if ok {
		req, resp = spec.request, spec.response
	}
	if _, err := encodeMsg(l.Request, req, l.Type, checker{p.schemas}, nil); err != nil && !errors.Is(err, errNotRecorded) {
		return fmt.Errorf("request: %w", err)
	}
	if _, err := encodeMsg(l.Response, resp, l.Type, checker{p.schemas}, nil); err != nil && !errors.Is(err, errNotRecorded) {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}

// checker is a provider's schemas as Read checks a call with them: each value is decoded with
// its type, and not written out (replay writes the answer it gives).
type checker struct{ *schemas }

func (c checker) encodeValue(r role, typeName string, index int, rv *Value, fill func(Path) (cty.Value, bool)) ([]byte, error) {
	if wholly(rv.Redacted) {
		return nil, notRecorded{"the value was not recorded (no schema says what in it is secret, or it did not decode by its schema)"}
	}
	b, err := c.blockFor(r, typeName, index)
	if err != nil {
		return nil, err
	}
	_, err = rv.toCty(b.ty, fill)
	return nil, err
}

// normal gives a message as a recording's JSON reads back: what a decoded message and a recorded
// one are compared as.
func normal(m Msg) (Msg, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var out Msg
	if err := decodeJSON(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// sameSchema says whether a provider's schema answer (wire) is the schema the recording shows.
func sameSchema(protocol int, wire []byte, shown *plugin.ProviderSchema) error {
	got, err := plugin.SchemaFromWire(protocol, wire)
	if err != nil {
		return fmt.Errorf("schema_wire is no schema answer (%v); was the recording edited?", err)
	}
	a, err := json.Marshal(got)
	if err != nil {
		return err
	}
	b, err := json.Marshal(shown)
	if err != nil {
		return err
	}
	if !bytes.Equal(a, b) {
		return errors.New("schema_wire, which replay sends tofu, is not the schema the recording shows (schema); was the recording edited? record it again")
	}
	return nil
}

// schemaResponse is the message a schema answer is, in both protocols.
const schemaResponse = "GetProviderSchema.Response"

// shownWire says whether a schema answer (wire) holds nothing the provider line does not show
// beside its schema: no field the model lacks, no diagnostic (text tofu would print that no
// reviewer reads), and exactly the server capabilities the line lists.
func shownWire(major int, wire []byte, shown map[string]bool) error {
	v := protocol.Published(major)
	unmodelled, err := v.Unmodelled(schemaResponse, wire)
	if err != nil {
		return fmt.Errorf("schema_wire does not parse as a schema answer (%v); was the recording edited?", err)
	}
	if len(unmodelled) > 0 {
		return fmt.Errorf("schema_wire, which replay sends tofu, holds fields oprov does not model (%s), which the recording cannot show; was the recording edited? record it again with an oprov that models them", strings.Join(unmodelled, ", "))
	}
	if len(plugin.WireFields(wire, protocol.Num(schemaResponse, "diagnostics"))) > 0 {
		return errors.New("schema_wire, which replay sends tofu, holds diagnostics the recording does not show; was the recording edited? record it again")
	}
	if err := unshownSchemas(major, wire); err != nil {
		return err
	}
	caps, err := serverCapabilities(major, wire)
	if err != nil {
		return err
	}
	for name, on := range shown {
		if !on {
			return fmt.Errorf("server_capabilities lists %s as false; it lists only the capabilities that are true (remove it)", name)
		}
	}
	if !maps.Equal(caps, shown) {
		return fmt.Errorf("schema_wire, which replay sends tofu, gives the server capabilities %v, and the line shows %v (server_capabilities); was the recording edited? record it again", capNames(caps), capNames(shown))
	}
	return nil
}

// unshownFields are the parts of a schema answer the line's schema (as tofu prints it) has no
// place for: a schema answer holding one cannot be shown, so it is refused, not sent unseen.
var unshownFields = []string{"provider_meta", "list_resource_schemas", "state_store_schemas", "action_schemas"}

// emptySchema says whether a Schema message describes nothing: its block has no attributes and
// no nested blocks (what SDKs send as provider_meta when a provider declares none).
func emptySchema(v *protocol.Version, schema []byte) bool {
	block := plugin.WireField(schema, v.Message("Schema").Named("block").Num)
	b := v.Message("Schema.Block")
	return len(plugin.WireFields(block, b.Named("attributes").Num)) == 0 && len(plugin.WireFields(block, b.Named("block_types").Num)) == 0
}

// unshownSchemas refuses a schema answer holding what the line's schema cannot show: the fields
// above, and a function parameter that allows unknown values.
func unshownSchemas(major int, wire []byte) error {
	v := protocol.Published(major)
	m := v.Message(schemaResponse)
	for _, name := range unshownFields {
		f := m.Named(name)
		if f == nil {
			continue
		}
		for _, part := range plugin.WireFields(wire, f.Num) {
			if name == "provider_meta" && emptySchema(v, part) {
				continue // SDKs send an empty one: it shows nothing
			}
			return fmt.Errorf("schema_wire holds %s, which the recording's schema cannot show; oprov does not record such a provider", name)
		}
	}
	fn := v.Message("Function")
	param := v.Message("Function.Parameter")
	if fn == nil || param == nil {
		return nil
	}
	allows := param.Named("allow_unknown_values").Num
	for _, entry := range plugin.WireFields(wire, m.Named("functions").Num) {
		f := plugin.WireField(entry, 2)
		for _, n := range []protowire.Number{fn.Named("parameters").Num, fn.Named("variadic_parameter").Num} {
			for _, p := range plugin.WireFields(f, n) {
				unknowns := false
				plugin.WireWalk(p, func(num protowire.Number, typ protowire.Type, value []byte) {
					if num == allows && typ == protowire.VarintType {
						x, _ := protowire.ConsumeVarint(value)
						unknowns = x != 0
					}
				})
				if unknowns {
					return fmt.Errorf("schema_wire has a function %q whose parameter allows unknown values, which the recording's schema cannot show; oprov does not record such a provider", plugin.WireField(entry, 1))
				}
			}
		}
	}
	return nil
}

// serverCapabilities reads the server capabilities of a schema answer by the model, as protobuf
// reads them (occurrences merge, the last value of a field wins): those that are true.
func serverCapabilities(major int, wire []byte) (map[string]bool, error) {
	m := protocol.Published(major).Message("ServerCapabilities")
	var out map[string]bool
	for _, c := range plugin.WireFields(wire, protocol.Num(schemaResponse, "server_capabilities")) {
		var bad error
		plugin.WireWalk(c, func(n protowire.Number, typ protowire.Type, value []byte) {
			f := m.Field(n)
			if f == nil || f.Type != "bool" || typ != protowire.VarintType {
				bad = fmt.Errorf("schema_wire's server capabilities hold field %d, which oprov does not read as a capability", n)
				return
			}
			x, _ := protowire.ConsumeVarint(value)
			if out == nil {
				out = map[string]bool{}
			}
			out[f.Name] = x != 0
		})
		if bad != nil {
			return nil, bad
		}
	}
	maps.DeleteFunc(out, func(_ string, on bool) bool { return !on })
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// capNames lists a set of capabilities by name, in order.
func capNames(set map[string]bool) []string {
	out := slices.Sorted(maps.Keys(set))
	if out == nil {
		return []string{}
	}
	return out
}
