package recording

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/pkg/plugin/tfplugin6"
)

var (
	secretProviderType = cty.Object(map[string]cty.Type{"region": cty.String, "token": cty.String})
	secretThingType    = cty.Object(map[string]cty.Type{"name": cty.String, "password": cty.String, "id": cty.String})
)

// secretSchema is a provider with a region and a sensitive token, and a resource x_thing with a
// sensitive password.
func secretSchema(t *testing.T) (*plugin.ProviderSchema, []byte) {
	t.Helper()
	str := []byte(`"string"`)
	wire, err := proto.Marshal(&tfplugin6.GetProviderSchema_Response{
		Provider: &tfplugin6.Schema{Block: &tfplugin6.Schema_Block{Attributes: []*tfplugin6.Schema_Attribute{
			{Name: "region", Type: str, Optional: true}, {Name: "token", Type: str, Optional: true, Sensitive: true}}}},
		ResourceSchemas: map[string]*tfplugin6.Schema{"x_thing": {Block: &tfplugin6.Schema_Block{Attributes: []*tfplugin6.Schema_Attribute{
			{Name: "name", Type: str, Required: true}, {Name: "password", Type: str, Optional: true, Sensitive: true},
			{Name: "id", Type: str, Computed: true}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := plugin.SchemaFromWire(6, wire)
	if err != nil {
		t.Fatal(err)
	}
	return s, wire
}

// recordedCall is a call as a provider saw it: its request and response bytes.
type recordedCall struct {
	rpc       string
	req, resp []byte
}

// recordWith makes a recording of calls as the recorder writes them, with key (nil: none).
func recordWith(t *testing.T, key *Key, calls ...recordedCall) string {
	t.Helper()
	s, wire := secretSchema(t)
	sch, err := newSchemas(s)
	if err != nil {
		t.Fatal(err)
	}
	sch.key = key
	r := &recorder{addr: "example.com/x/x", schemas: sch}
	head := Line{Format: formatVersion, Program: "tofu 1.12.0"}
	if key != nil {
		head.KeyID = key.ID()
	}
	lines := []any{head, Line{Provider: "example.com/x/x", Version: "1.0.0", Protocol: 6, Schema: s, SchemaWire: wire}}
	for _, c := range calls {
		lines = append(lines, r.line(c.rpc, c.req, c.resp, nil))
	}
	var b strings.Builder
	for _, l := range lines {
		j, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(j, '\n'))
	}
	return b.String()
}

// replayer reads a recording, unlocks it with key, and gives its replayer.
func replayer(t *testing.T, text string, key *Key, ignore ...Ignore) *Replayer {
	t.Helper()
	rec, err := Read(strings.NewReader(text), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Unlock(key); err != nil {
		t.Fatal(err)
	}
	return rec.Replayers(ignore)[0]
}

func dv(t *testing.T, v cty.Value, ty cty.Type) []byte {
	t.Helper()
	mp, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		t.Fatal(err)
	}
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), mp)
}

// fields writes a message of length-delimited fields, numbered from 1 (nil: left out).
func fields(vals ...[]byte) []byte {
	var out []byte
	for i, v := range vals {
		if v != nil {
			out = protowire.AppendBytes(protowire.AppendTag(out, protowire.Number(i+1), protowire.BytesType), v)
		}
	}
	return out
}

func thing(name, password, id string) cty.Value {
	str := func(s string) cty.Value {
		switch s {
		case "":
			return cty.NullVal(cty.String)
		case "?":
			return cty.UnknownVal(cty.String)
		}
		return cty.StringVal(s)
	}
	return cty.ObjectVal(map[string]cty.Value{"name": str(name), "password": str(password), "id": str(id)})
}

func providerConfig(region, token string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal(region), "token": cty.StringVal(token)})
}

func planReq(t *testing.T, prior, proposed, config cty.Value) []byte {
	return fields([]byte("x_thing"), dv(t, prior, secretThingType), dv(t, proposed, secretThingType), dv(t, config, secretThingType))
}

func applyReq(t *testing.T, prior, planned, config cty.Value) []byte {
	return fields([]byte("x_thing"), dv(t, prior, secretThingType), dv(t, planned, secretThingType), dv(t, config, secretThingType))
}

func configureReq(t *testing.T, cfg cty.Value) []byte {
	return fields([]byte("1.12.0"), dv(t, cfg, secretProviderType))
}

// ask answers one call, and says whether replay refused it (and how).
func ask(t *testing.T, rp *Replayer, rpc string, req []byte) (resp []byte, refused string) {
	t.Helper()
	resp, err := rp.Answer(context.Background(), &plugin.Call{Method: "/tfplugin6.Provider/" + rpc, Protocol: 6, Request: req})
	if err != nil {
		return nil, err.Error()
	}
	if strings.Contains(string(resp), "the recording holds no") {
		return resp, string(resp)
	}
	return resp, ""
}

func testKey(t *testing.T, b byte) *Key {
	t.Helper()
	k, err := parseKey(strings.Repeat(string("0123456789abcdef"[b%16]), 64), "test")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A recorded create and a refresh of its object, whose password is sensitive.
func createdThing(t *testing.T, key *Key) string {
	cfg := thing("a", "s3cret", "")
	return recordWith(t, key,
		recordedCall{"PlanResourceChange", planReq(t, cty.NullVal(secretThingType), cfg, cfg), fields(dv(t, thing("a", "s3cret", "?"), secretThingType))},
		recordedCall{"ApplyResourceChange", applyReq(t, cty.NullVal(secretThingType), thing("a", "s3cret", "?"), cfg), fields(dv(t, thing("a", "s3cret", "id-1"), secretThingType))},
	)
}

// A sensitive attribute changed since the recording is a difference, in a recorded call and in a
// plan replay derives for an object the recording shows: never "No changes". The secret is not
// in the file; its digest is.
func TestReplayChangedSensitiveAttributeIsADifference(t *testing.T) {
	key := testKey(t, 1)
	text := createdThing(t, key)
	if strings.Contains(text, "s3cret") || !strings.Contains(text, `"digests":["hmac-sha256:`) {
		t.Fatalf("the recording holds the secret, or no digest of it:\n%s", text)
	}
	rp := replayer(t, text, key)
	null := cty.NullVal(secretThingType)
	if _, why := ask(t, rp, "PlanResourceChange", planReq(t, null, thing("a", "s3cret", ""), thing("a", "s3cret", ""))); why != "" {
		t.Fatalf("the recorded create, unchanged, was refused: %s", why)
	}
	for _, pw := range []string{"other", ""} {
		_, why := ask(t, rp, "PlanResourceChange", planReq(t, null, thing("a", pw, ""), thing("a", pw, "")))
		if why == "" || !strings.Contains(why, "password") {
			t.Errorf("a create with the password %q, not the recorded one, was answered: %q", pw, why)
		}
	}
	// The object exists: the plan of the configuration it was made with is derived (no change),
	// and one with another password is a difference.
	state := thing("a", "s3cret", "id-1")
	if _, why := ask(t, rp, "PlanResourceChange", planReq(t, state, state, thing("a", "s3cret", ""))); why != "" {
		t.Fatalf("the plan of the unchanged object was refused: %s", why)
	}
	_, why := ask(t, rp, "PlanResourceChange", planReq(t, state, thing("a", "changed", "id-1"), thing("a", "changed", "")))
	if !strings.Contains(why, "config.password: a redacted value other than the recorded one") {
		t.Errorf("a changed password planned as no change: %q", why)
	}
	// A state whose secret is not the recorded one is not an object the recording shows.
	if _, why := ask(t, rp, "PlanResourceChange", planReq(t, thing("a", "changed", "id-1"), thing("a", "changed", "id-1"), thing("a", "changed", ""))); why == "" {
		t.Errorf("an object with another password planned as no change")
	}
}

// A changed provider configuration (a region; a token) is a difference in ConfigureProvider,
// though the whole configuration is redacted in the file.
func TestReplayChangedProviderConfigIsADifference(t *testing.T) {
	key := testKey(t, 2)
	text := recordWith(t, key,
		recordedCall{"ValidateProviderConfig", fields(dv(t, providerConfig("eu-west-1", "tok"), secretProviderType)), nil},
		recordedCall{"ConfigureProvider", configureReq(t, providerConfig("eu-west-1", "tok")), nil})
	if strings.Contains(text, "eu-west-1") {
		t.Fatalf("the recording holds the provider configuration:\n%s", text)
	}
	// --replay-ignore *.region names no resource or data source: the provider configuration
	// has no state in its answer that could show the change, so it is still compared.
	rp := replayer(t, text, key, Ignore{Type: "*", Path: Path{"region"}})
	if _, why := ask(t, rp, "ConfigureProvider", configureReq(t, providerConfig("eu-west-1", "tok"))); why != "" {
		t.Fatalf("the recorded configuration was refused: %s", why)
	}
	for _, c := range []struct{ region, token, where string }{{"us-east-1", "tok", "config.region"}, {"eu-west-1", "tok2", "config.token"}} {
		_, why := ask(t, rp, "ConfigureProvider", configureReq(t, providerConfig(c.region, c.token)))
		if !strings.Contains(why, c.where+": a redacted value other than the recorded one") {
			t.Errorf("ConfigureProvider with %s changed: %q", c.where, why)
		}
		_, why = ask(t, rp, "ValidateProviderConfig", fields(dv(t, providerConfig(c.region, c.token), secretProviderType)))
		if why == "" {
			t.Errorf("ValidateProviderConfig with %s changed was answered", c.where)
		}
	}
}

// A recording made with another key, or replayed with none, is an error that names the
// variable, not a difference at every secret.
func TestReplayWithAnotherKeyIsAnError(t *testing.T) {
	text := createdThing(t, testKey(t, 3))
	rec, err := Read(strings.NewReader(text), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	other := testKey(t, 4)
	err = rec.Unlock(other)
	if err == nil || !strings.Contains(err.Error(), "OPROV_RECORDING_KEY") || !strings.Contains(err.Error(), testKey(t, 3).ID()) || !strings.Contains(err.Error(), other.ID()) {
		t.Errorf("another key: %v", err)
	}
	if err := rec.Unlock(nil); err == nil || !strings.Contains(err.Error(), "OPROV_RECORDING_KEY") {
		t.Errorf("no key: %v", err)
	}
	if err := rec.Unlock(testKey(t, 3)); err != nil {
		t.Errorf("the key it was made with: %v", err)
	}
	// A header stripped of its key ID, digests kept: refused, not compared.
	stripped := strings.Replace(text, `,"key_id":"`+testKey(t, 3).ID()+`"`, "", 1)
	rec, err = Read(strings.NewReader(stripped), "rec.jsonl", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Unlock(testKey(t, 3)); err == nil || !strings.Contains(err.Error(), "key_id") {
		t.Errorf("digests with no key ID: %v", err)
	}
	// A key ID that is not one (escape sequences for the terminal) is refused, not printed.
	hostile := strings.Replace(text, testKey(t, 3).ID(), `\u001b]0;pwned\u0007`, 1)
	if rec, err = Read(strings.NewReader(hostile), "rec.jsonl", Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Unlock(testKey(t, 3)); err == nil || strings.ContainsAny(err.Error(), "\x1b\x07") || !strings.Contains(err.Error(), "key_id") {
		t.Errorf("a key ID of escape sequences: %q", err)
	}
}

// A redacted value recorded with no digest (no key, or written by hand) matches nothing, not
// even the value it was: it cannot be compared, so it is a difference.
func TestReplayUndigestedSecretMatchesNothing(t *testing.T) {
	for name, text := range map[string]string{
		"recorded with no key": createdThing(t, nil),
		"digests taken out": func() string {
			text := createdThing(t, testKey(t, 5))
			var out []string
			for _, l := range strings.Split(text, "\n") {
				for i := strings.Index(l, `,"digests":[`); i >= 0; i = strings.Index(l, `,"digests":[`) {
					l = l[:i] + l[i+strings.Index(l[i:], "]")+1:]
				}
				out = append(out, l)
			}
			return strings.Join(out, "\n")
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(text, "digests") {
				t.Fatalf("the recording has digests:\n%s", text)
			}
			rp := replayer(t, text, nil)
			null := cty.NullVal(secretThingType)
			_, why := ask(t, rp, "PlanResourceChange", planReq(t, null, thing("a", "s3cret", ""), thing("a", "s3cret", "")))
			if !strings.Contains(why, "no digest") {
				t.Errorf("a secret recorded with no digest matched: %q", why)
			}
			state := thing("a", "s3cret", "id-1")
			if _, why := ask(t, rp, "PlanResourceChange", planReq(t, state, thing("a", "x", "id-1"), thing("a", "x", ""))); why == "" {
				t.Errorf("a plan of an object with a secret recorded with no digest was derived")
			}
		})
	}
}

// Digests are of the value and its type: equal values agree, and anything else differs: another
// value, null, another type, another key. No digest holds the value.
func TestDigestCanonical(t *testing.T) {
	k := testKey(t, 6)
	a := k.digest(cty.String, cty.StringVal("eu-west-1"))
	if !validDigest(a) || a != k.digest(cty.String, cty.StringVal("eu-west-1")) {
		t.Fatalf("digest %q is not stable or not well-formed", a)
	}
	one, _ := cty.ParseNumberVal("1")
	oneAgain, _ := cty.ParseNumberVal("1.000")
	if k.digest(cty.Number, one) != k.digest(cty.Number, oneAgain) {
		t.Errorf("1 and 1.000 have different digests")
	}
	m1 := cty.MapVal(map[string]cty.Value{"a": cty.StringVal("1"), "b": cty.StringVal("2")})
	m2 := cty.MapVal(map[string]cty.Value{"b": cty.StringVal("2"), "a": cty.StringVal("1")})
	if k.digest(m1.Type(), m1) != k.digest(m2.Type(), m2) {
		t.Errorf("one map, two digests")
	}
	for name, d := range map[string]string{
		"another value": k.digest(cty.String, cty.StringVal("us-east-1")),
		"null":          k.digest(cty.String, cty.NullVal(cty.String)),
		"empty":         k.digest(cty.String, cty.StringVal("")),
		"another type":  k.digest(cty.DynamicPseudoType, cty.StringVal("eu-west-1")),
		"another key":   testKey(t, 7).digest(cty.String, cty.StringVal("eu-west-1")),
		"bytes":         k.digestBytes([]byte("eu-west-1")),
		"json":          k.digestJSON("eu-west-1"),
	} {
		if d == a || d == "" {
			t.Errorf("%s: digest %q", name, d)
		}
	}
	if (*Key)(nil).digest(cty.String, cty.StringVal("x")) != "" {
		t.Errorf("no key gave a digest")
	}
	if strings.Contains(a, hexOf("eu-west-1")) || len(k.ID()) != keyIDDigits || strings.Contains(hexOf(string(k.k)), k.ID()) {
		t.Errorf("a digest or key ID shows what it digests")
	}
}

func hexOf(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}

// A recording whose digests are damaged is refused, with its line.
func TestReadRefusesBadDigests(t *testing.T) {
	text := createdThing(t, testKey(t, 8))
	lines := strings.Split(text, "\n")
	d := lines[2][strings.Index(lines[2], `"hmac-sha256:`):]
	d = d[:strings.IndexByte(d[1:], '"')+2]
	for name, c := range map[string]struct{ from, to, want string }{
		"one too many": {d, d + "," + d, "2 digests for 1 redacted places"},
		"not hex":      {d, `"hmac-sha256:zz"`, "is not hmac-sha256: and 64 hex digits"},
		"not a string": {d, `5`, "is not hmac-sha256:"},
		"not an array": {`"digests":[` + d + `]`, `"digests":"x"`, "want an array of digests"},
	} {
		t.Run(name, func(t *testing.T) {
			bad := strings.Replace(text, c.from, c.to, 1)
			_, err := Read(strings.NewReader(bad), "rec.jsonl", Limits{})
			if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Read: %v, want line 3 and %q", err, c.want)
			}
		})
	}
}

// --replay-ignore leaves an attribute out of the comparison, never out of the answer: a plan of
// an object whose ignored attribute changed plans the change.
func TestReplayIgnoreShowsTheChange(t *testing.T) {
	key := testKey(t, 9)
	rp := replayer(t, createdThing(t, key), key, Ignore{Type: "x_thing", Path: Path{"name"}})
	state := thing("a", "s3cret", "id-1")
	resp, why := ask(t, rp, "PlanResourceChange", planReq(t, state, thing("b", "s3cret", "id-1"), thing("b", "s3cret", "")))
	if why != "" {
		t.Fatalf("the plan with the ignored attribute changed was refused: %s", why)
	}
	planned, err := ctymsgpack.Unmarshal(plugin.WireField(plugin.WireField(resp, 1), 1), secretThingType)
	if err != nil {
		t.Fatal(err)
	}
	if got := planned.GetAttr("name"); !got.RawEquals(cty.StringVal("b")) {
		t.Errorf("the planned name is %#v: the plan shows no change", got)
	}
	// A recorded create answers with the ignored attribute from the request too.
	null := cty.NullVal(secretThingType)
	resp, why = ask(t, rp, "PlanResourceChange", planReq(t, null, thing("c", "s3cret", ""), thing("c", "s3cret", "")))
	if why != "" {
		t.Fatalf("the create with the ignored attribute changed was refused: %s", why)
	}
	planned, err = ctymsgpack.Unmarshal(plugin.WireField(plugin.WireField(resp, 1), 1), secretThingType)
	if err != nil {
		t.Fatal(err)
	}
	if got := planned.GetAttr("name"); !got.RawEquals(cty.StringVal("c")) || planned.GetAttr("id").IsKnown() {
		t.Errorf("the planned create is %#v, want name c and the id unknown", planned)
	}
}

// The key: made on first use (0600, in a directory only the user can write), the same one after;
// OPROV_RECORDING_KEY wins; a key file that is a link, or others can read, is refused; a replay
// with no key anywhere has none, and makes none.
func TestRecordingKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	t.Setenv("OPROV_STATE_DIR", dir)
	t.Setenv(keyEnv, "")
	if k, err := ReplayKey(); k != nil || err != nil {
		t.Fatalf("a replay with no key file: %v, %v", k, err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a replay made the key's directory")
	}
	k, err := RecordKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, keyFileName)
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v, %v", st, err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("the key's directory has mode %v", st.Mode())
	}
	if again, err := RecordKey(); err != nil || again.ID() != k.ID() {
		t.Errorf("a second recording has another key: %v", err)
	}
	if again, err := ReplayKey(); err != nil || again.ID() != k.ID() {
		t.Errorf("a replay has another key: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the key's directory holds %d files", len(entries))
	}

	hexKey := strings.Repeat("ab", 32)
	t.Setenv(keyEnv, hexKey)
	if e, err := ReplayKey(); err != nil || e.ID() == k.ID() {
		t.Errorf("OPROV_RECORDING_KEY was not used: %v", err)
	}
	t.Setenv(keyEnv, "abcd")
	if _, err := RecordKey(); err == nil || !strings.Contains(err.Error(), "OPROV_RECORDING_KEY") || strings.Contains(err.Error(), "abcd") {
		t.Errorf("a short key: %v", err)
	}
	t.Setenv(keyEnv, "")

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReplayKey(); err == nil || !strings.Contains(err.Error(), "only you can read") {
		t.Errorf("a key file others can read: %v", err)
	}
	other := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(other, []byte(hexKey), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	if err := os.Symlink(other, path); err != nil {
		t.Fatal(err)
	}
	if _, err := RecordKey(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a key file that is a link: %v", err)
	}
	os.Remove(path)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := RecordKey(); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("a key directory anyone can write: %v", err)
	}
}

// A recording into a directory that does not exist is an error naming the file asked for and
// the fix, not the temporary file it is first written to.
func TestCreateNamesTheDestination(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata", "example.jsonl")
	_, err := Create(path, "tofu", nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "mkdir -p") || strings.Contains(err.Error(), ".oprov-recording-") {
		t.Errorf("Create in a missing directory: %v", err)
	}
}

// Each digest stays with its redacted place when the places are put in order: a value with
// several secrets, redacted with a key, compares equal to itself however its attributes are
// walked.
func TestDigestsFollowTheirPathsWhenSorted(t *testing.T) {
	k, err := parseKey(strings.Repeat("ab", 32), "test")
	if err != nil {
		t.Fatal(err)
	}
	attrs, vals := map[string]cty.Type{}, map[string]cty.Value{}
	for i := range 12 {
		name := fmt.Sprintf("s%02d", i)
		attrs[name], vals[name] = cty.String, cty.StringVal("secret-"+name)
	}
	ty := cty.Object(attrs)
	for range 5 { // the walk's order is the map's: a few tries meet an unsorted one
		rv, err := fromCty(cty.ObjectVal(vals), ty, func(p Path) bool { return len(p) == 1 }, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(rv.Redacted) != 12 || len(rv.Digests) != 12 {
			t.Fatalf("redacted %v digests %v", rv.Redacted, rv.Digests)
		}
		for i, p := range rv.Redacted {
			name := p[0].(string)
			if rv.Digests[i] != k.digest(cty.String, vals[name]) {
				t.Fatalf("the digest beside %s is not its value's", p)
			}
		}
	}
}
