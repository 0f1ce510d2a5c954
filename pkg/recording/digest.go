package recording

// How a changed secret is seen without the secret in the file. Each redacted value has a keyed
// digest beside it: HMAC-SHA256, with the recording key, of the value's type and its msgpack
// encoding (equal values give equal digests; a null and a value, or two types, differ). Replay
// redacts the live request the same way, with the same key, and compares digests: a secret
// that changed is a difference, and a redacted value with no digest (made with no key, or
// hand-edited) is a difference too, never a match. Without the key, a digest tells nothing of
// the value, even of a short one such as a region; the header names the key by an ID derived
// from it, so a replay with another key says so instead of reporting every secret as changed.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
)

const (
	// keyEnv names the variable that gives the recording key as text: at least keyBytes random
	// bytes in hex.
	keyEnv = "OPROV_RECORDING_KEY"
	// keyFileName is the key file made on first use when keyEnv is not set.
	keyFileName = "recording.key"
	keyBytes    = 32
	// digestPrefix starts every digest: the algorithm, then 64 hex digits.
	digestPrefix = "hmac-sha256:"
	// keyIDDigits is how much of the key's own digest names it in a header.
	keyIDDigits = 16
	// maxKeyFile bounds what is read of a key file.
	maxKeyFile = 4096
)

// Key is the secret a recording's digests are made and compared with.
type Key struct {
	k   []byte
	src string // where it came from, for errors: keyEnv or the file
}

// parseKey reads a key's text (hex, at least keyBytes bytes). The text is never part of an error.
func parseKey(text, src string) (*Key, error) {
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) < keyBytes {
		return nil, fmt.Errorf("%s: a recording key is at least %d random bytes written in hex (%d hex digits), as `openssl rand -hex %d` prints", src, keyBytes, 2*keyBytes, keyBytes)
	}
	return &Key{k: b, src: src}, nil
}

// mac is HMAC-SHA256 over a domain and parts, each length-prefixed so no two lists of parts
// give the same input.
func (k *Key) mac(domain string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, k.k)
	for _, p := range append([][]byte{[]byte(domain)}, parts...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// ID names the key in a recording's header: a digest of a fixed text, which tells nothing of
// the key.
func (k *Key) ID() string {
	return hex.EncodeToString(k.mac("oprov recording key id"))[:keyIDDigits]
}

// digest is the digest of a value of type ty: of the type and of the value's msgpack encoding
// (which holds unknown values, sorts maps, sets and attributes, and writes equal numbers
// alike). It is "" with no key. A value that cannot be encoded gets a digest of random bytes,
// which matches nothing.
func (k *Key) digest(ty cty.Type, v cty.Value) (d string) {
	if k == nil {
		return ""
	}
	defer func() {
		if recover() != nil { // cty panics on a value that does not fit its type
			d = k.unmatchable()
		}
	}()
	tj, err := ctyjson.MarshalType(ty)
	if err != nil {
		return k.unmatchable()
	}
	mp, err := ctymsgpack.Marshal(v, ty)
	if err != nil {
		return k.unmatchable()
	}
	return digestPrefix + hex.EncodeToString(k.mac("value", tj, mp))
}

// unmatchable is a well-formed digest no value has.
func (k *Key) unmatchable() string {
	b := make([]byte, keyBytes)
	rand.Read(b)
	return digestPrefix + hex.EncodeToString(k.mac("unencodable", b))
}

// digestBytes is the digest of opaque bytes, such as private state.
func (k *Key) digestBytes(b []byte) string {
	if k == nil {
		return ""
	}
	return digestPrefix + hex.EncodeToString(k.mac("bytes", b))
}

// digestJSON is the digest of a part of a stored state's JSON (numbers as written, object keys
// sorted).
func (k *Key) digestJSON(j any) string {
	if k == nil {
		return ""
	}
	b, err := json.Marshal(j)
	if err != nil {
		return k.unmatchable()
	}
	return digestPrefix + hex.EncodeToString(k.mac("json", b))
}

// redact puts the redaction marker in place of v (of type ty) at p, with its digest.
func (out *Value) redact(p Path, ty cty.Type, v cty.Value) any {
	out.Redacted = append(out.Redacted, clonePath(p))
	out.texts = appendTexts(out.texts, v)
	if out.key != nil {
		out.Digests = append(out.Digests, out.key.digest(ty, v))
	}
	return redactedText
}

// digestsOf gives the digests of a stored state's redacted places, from its JSON as it came.
func (k *Key) digestsOf(j any, redacted []Path) []string {
	if k == nil || len(redacted) == 0 {
		return nil
	}
	out := make([]string, 0, len(redacted))
	for _, p := range redacted {
		out = append(out, k.digestJSON(jsonAt(j, p)))
	}
	return out
}

// jsonAt is the JSON at p (nil where there is none).
func jsonAt(j any, p Path) any {
	for _, s := range p {
		switch t := j.(type) {
		case map[string]any:
			k, _ := s.(string)
			j = t[k]
		case []any:
			i, ok := s.(int)
			if !ok || i < 0 || i >= len(t) {
				return nil
			}
			j = t[i]
		default:
			return nil
		}
	}
	return j
}

// checkDigests checks a recorded value's digests: none, or one per redacted place, each a
// digest as this oprov writes them.
func checkDigests(v any, redacted int) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array of digests, have %s", jsonKind(v))
	}
	if len(l) != redacted {
		return nil, fmt.Errorf("%d digests for %d redacted places: one each, in the same order", len(l), redacted)
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok || !validDigest(s) {
			return nil, fmt.Errorf("digest %d is not %s and 64 hex digits", i+1, digestPrefix)
		}
		out = append(out, s)
	}
	return out, nil
}

func validKeyID(s string) bool {
	return len(s) == keyIDDigits && isHex(s)
}

func validDigest(s string) bool {
	h, ok := strings.CutPrefix(s, digestPrefix)
	return ok && len(h) == 2*sha256.Size && isHex(h)
}

// isHex reports whether s is lower-case hex digits.
func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// undigested numbers the marks of redacted places that have no digest, so that no two are equal.
var undigested atomic.Uint64

// secretMarks gives the marks of a recorded value's redacted places, in their order: each with
// its digest, so that two are equal when their values are; or, with no digest, a mark equal to
// no other (it cannot be compared, so it is a difference).
func secretMarks(m map[string]any, n int) []mark {
	ds, err := checkDigests(m["digests"], n)
	out := make([]mark, n)
	for i := range out {
		if err == nil && ds != nil && ds[i] != "" {
			out[i] = mark(redactedText + " " + ds[i])
			continue
		}
		out[i] = mark(fmt.Sprintf("%s, no digest #%d", redactedText, undigested.Add(1)))
	}
	return out
}

// secretMark reports whether v marks a redacted place, and whether it holds a digest.
func secretMark(v any) (secret, digested bool) {
	m, ok := v.(mark)
	if !ok || !strings.HasPrefix(string(m), redactedText) {
		return false, false
	}
	return true, strings.HasPrefix(string(m), redactedText+" "+digestPrefix)
}

// sameSecret reports whether two compared places hold the same secret: both redacted, with the
// same digest.
func sameSecret(a, b any) bool {
	am, _ := a.(mark)
	bm, _ := b.(mark)
	_, digested := secretMark(a)
	return digested && am == bm
}

// secretDiff says how a difference at a redacted place reads; ok is false for another difference.
func secretDiff(d Diff) (string, bool) {
	rs, rd := secretMark(d.Recorded)
	ns, _ := secretMark(d.Now)
	where := d.Field
	if len(d.Path) > 0 {
		where += "." + d.Path.String()
	}
	switch {
	case rs && !rd:
		return fmt.Sprintf("%s: recorded %s with no digest, so it cannot be compared; record again with this oprov", where, redactedText), true
	case rs && ns:
		return fmt.Sprintf("%s: a redacted value other than the recorded one (their digests differ)", where), true
	case rs:
		return fmt.Sprintf("%s: recorded a redacted value, now %s", where, show(d.Now)), true
	case ns:
		return fmt.Sprintf("%s: recorded %s, now a redacted value", where, show(d.Recorded)), true
	}
	return "", false
}

// showMark writes a mark for a reader: a redacted place without its digest.
func showMark(m mark) string {
	if s, _ := secretMark(m); s {
		return redactedText
	}
	return string(m)
}

// Unlock gives replay the key to compare the recording's secrets with (nil: none). A recording
// that holds digests needs the key it was made with: another key, or none, is an error naming
// OPROV_RECORDING_KEY, not a difference at every secret.
func (r *Recording) Unlock(k *Key) error {
	if r.holdsDigests() {
		id := r.Header.KeyID
		switch {
		case id == "":
			return errors.New("it holds digests of secrets but its header names no key_id: was it edited? record it again")
		case !validKeyID(id):
			return fmt.Errorf("its header's key_id is not %d hex digits: was it edited? record it again", keyIDDigits)
		case k == nil:
			return fmt.Errorf("it was made with the recording key %s, and there is no key here: set %s to that key (in CI, from the secret that holds it), or replay as the user who recorded it", id, keyEnv)
		case k.ID() != id:
			return fmt.Errorf("it was made with the recording key %s, and the key here (from %s) is %s: set %s to the key it was made with", id, k.src, k.ID(), keyEnv)
		}
	}
	r.key = k
	return nil
}

// replayKey gives the key live requests are digested with: the recording's, else one made for
// this replay only, so that no live secret matches a recorded one without a digest.
func (r *Recording) replayKey() *Key {
	if r.key == nil {
		b := make([]byte, keyBytes)
		rand.Read(b)
		r.key = &Key{k: b, src: "a key made for this replay"}
	}
	return r.key
}

// holdsDigests reports whether any recorded value has digests.
func (r *Recording) holdsDigests() bool {
	for _, p := range r.Providers {
		for _, c := range p.Calls {
			spec, ok := callSpecs()[c.Line.Call]
			if !ok {
				continue
			}
			if msgDigests(c.Line.Request, spec.request) || msgDigests(c.Line.Response, spec.response) {
				return true
			}
		}
	}
	return false
}

// msgDigests reports whether a recorded message has digests in a value field (the message
// specs' nesting bounds the depth).
func msgDigests(msg Msg, m *message) bool {
	if m == nil {
		return false
	}
	for _, f := range m.fields {
		vals := []any{msg[f.name]}
		if f.repeated {
			vals, _ = msg[f.name].([]any)
		}
		for _, v := range vals {
			o, ok := v.(map[string]any)
			switch {
			case !ok:
			case f.kind == kValue || f.kind == kRawState || f.kind == kSecret:
				if l, _ := o["digests"].([]any); len(l) > 0 {
					return true
				}
			case f.kind == kMessage && msgDigests(o, f.sub):
				return true
			}
		}
	}
	return false
}

// RecordKey gives the key a recording is made with: OPROV_RECORDING_KEY, else the key file in
// the user's configuration directory, made on first use.
func RecordKey() (*Key, error) { return loadKey(true) }

// ReplayKey gives the key a replay compares secrets with: OPROV_RECORDING_KEY, else the key
// file if there is one; nil when there is neither.
func ReplayKey() (*Key, error) { return loadKey(false) }

// keyDir is where the key file is kept: $OPROV_STATE_DIR, else the user's configuration
// directory's oprov.
func keyDir() (string, error) {
	if d := os.Getenv("OPROV_STATE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "oprov"), nil
}

func loadKey(create bool) (*Key, error) {
	if t := os.Getenv(keyEnv); t != "" {
		return parseKey(t, keyEnv)
	}
	dir, err := keyDir()
	if err != nil {
		if !create {
			return nil, nil
		}
		return nil, fmt.Errorf("the recording key: no configuration directory (%v); set %s", err, keyEnv)
	}
	path := filepath.Join(dir, keyFileName)
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("the recording key: %w; set %s instead", err, keyEnv)
		}
	}
	root, err := openKeyDir(dir)
	if err != nil {
		if !create && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	defer root.Close()
	k, err := readKeyFile(root, path)
	switch {
	case err == nil:
		return k, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case !create:
		return nil, nil
	}
	if err := writeKeyFile(root, path); err != nil {
		return nil, err
	}
	return readKeyFile(root, path)
}

// openKeyDir opens the key's directory: the user's own, which nobody else can write.
func openKeyDir(dir string) (*os.Root, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("the recording key's directory: %w", err)
	}
	st, err := root.Stat(".")
	if err == nil && (!ownedByMe(st) || st.Mode().Perm()&0o022 != 0) {
		err = fmt.Errorf("%s is not a directory of yours that only you can write: chmod 700 it, or set %s", dir, keyEnv)
	}
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("the recording key: %w", err)
	}
	return root, nil
}

// readKeyFile reads the key file: a regular file (not a link) of the user's, that nobody else
// can read, checked on the descriptor it is read from.
func readKeyFile(root *os.Root, path string) (*Key, error) {
	bad := fmt.Errorf("the recording key %s is not a regular file of yours that only you can read (mode 0600): remove it to make a new one, or set %s", path, keyEnv)
	lst, err := root.Lstat(keyFileName)
	if err != nil {
		return nil, err
	}
	if !lst.Mode().IsRegular() {
		return nil, bad
	}
	f, err := root.Open(keyFileName)
	if err != nil {
		return nil, fmt.Errorf("the recording key: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the recording key: %w", err)
	}
	if !st.Mode().IsRegular() || !os.SameFile(lst, st) || !ownedByMe(st) || st.Mode().Perm()&0o077 != 0 {
		return nil, bad
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("the recording key: %w", err)
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("the recording key %s is longer than %d bytes: remove it to make a new one", path, maxKeyFile)
	}
	return parseKey(string(b), path)
}

// writeKeyFile makes a new key: written whole to a file of its own (0600), then linked into
// place, which never replaces a key another process made meanwhile.
func writeKeyFile(root *os.Root, path string) error {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("the recording key: %w", err)
	}
	n := make([]byte, 8)
	rand.Read(n)
	tmp := ".recording.key-" + hex.EncodeToString(n)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("the recording key: %w; set %s instead", err, keyEnv)
	}
	defer root.Remove(tmp)
	_, err = f.Write([]byte(hex.EncodeToString(b) + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = root.Link(tmp, keyFileName); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("the recording key %s: %w", path, err)
	}
	return nil
}
