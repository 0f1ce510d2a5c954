package plugin

import (
	"bytes"
	"os"
	"strings"
	"sync"
)

// quietLogEnv are the settings that switch off the logs of providers built on HashiCorp's Go SDKs
// (terraform-plugin-log): the SDK's own, with its subsystems (protocol, framework, helper/schema),
// and the provider's. Unset, they log every request at TRACE, as JSON on stderr, for tofu to
// filter: about 100 lines and 45 KB per resource applied, which costs the provider the writing
// and oprov the reading (go-plugin parses each line) when nobody reads them.
var quietLogEnv = []string{"TF_LOG_SDK=off", "TF_LOG_PROVIDER=off"}

// withQuietLogs adds quietLogEnv to env, except for variables env sets already (the user's own
// choice stands).
func withQuietLogs(env []string) []string {
	for _, kv := range quietLogEnv {
		name := kv[:strings.IndexByte(kv, '=')+1]
		set := false
		for _, e := range env {
			if strings.HasPrefix(e, name) {
				set = true
				break
			}
		}
		if !set {
			env = append(env, kv)
		}
	}
	return env
}

// providerEnv is the environment a provider starts with: oprov's own, then opts.Env, with its
// logs switched off unless someone reads them (opts.Log).
func providerEnv(opts Options) []string {
	env := append(os.Environ(), opts.Env...)
	if opts.Log == nil {
		env = withQuietLogs(env)
	}
	return env
}

// tailBuffer keeps the last max bytes written to it. It grows to twice that before it drops the
// oldest bytes, so that keeping the tail of a chatty stream costs a copy per max bytes written
// rather than one per write.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf == nil {
		t.buf = make([]byte, 0, 2*t.max)
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	if len(t.buf)+len(p) > 2*t.max {
		t.buf = t.buf[:copy(t.buf, t.buf[len(t.buf)-(t.max-len(p)):])]
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// String is the last max bytes written, as valid UTF-8.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	return string(bytes.ToValidUTF8(b, nil))
}
