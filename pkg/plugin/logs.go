package plugin

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/oprov/oprov/pkg/sandbox"
)

// quietLogEnv are the settings that switch off the logs of providers built on HashiCorp's Go SDKs
// (terraform-plugin-log): the SDK's own (TF_LOG_SDK; its protocol, framework and helper/schema
// loggers follow it unless set themselves), and the provider's own tflog lines, which
// terraform-plugin-go reads from TF_LOG_PROVIDER_<TYPE> (added per provider, see providerEnv).
// Unset, they log every request at TRACE, as JSON on stderr, for tofu to filter: about 100 lines
// and 45 KB per resource applied, which costs the provider the writing and oprov the reading
// (go-plugin parses each line) when nobody reads them. What a provider prints through Go's
// standard log package (SDKv2 sends it at TRACE whatever the level) still arrives.
var quietLogEnv = []string{"TF_LOG_SDK=off"}

// withQuietLogs adds settings to env, except for variables env sets already (the user's own
// choice stands).
func withQuietLogs(env []string, settings ...string) []string {
	for _, kv := range settings {
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

// providerEnv is the environment a provider starts with: oprov's own (only the variables its
// sandbox passes through, when it has one), then opts.Env, with its logs switched off unless
// someone reads them (opts.Log): under -v the provider's own log lines are read and its SDK's
// request logs stay off; only the debug level (opts.Debug) turns those on too.
func providerEnv(opts Options) []string {
	env := os.Environ()
	if opts.Sandbox != nil {
		env = sandbox.FilterEnv(env, opts.Sandbox.Env)
	}
	env = append(env, opts.Env...)
	if opts.Log != nil {
		if opts.debugLogs() {
			return env
		}
		return withQuietLogs(env, quietLogEnv...)
	}
	settings := quietLogEnv
	if opts.Type != "" {
		// terraform-plugin-go names the variable after the type, with '-' as '_', in capitals.
		name := strings.ToUpper(strings.ReplaceAll(opts.Type, "-", "_"))
		settings = append(slices.Clip(settings), "TF_LOG_PROVIDER_"+name+"=off")
	}
	return withQuietLogs(env, settings...)
}

// debugPluginVariable, set to anything, makes -v the debug level (as run -vv): go-plugin's own
// messages (starting the process, the handshake, the stdio stream) and the SDKs' request logs
// beside the providers' own log lines.
const debugPluginVariable = "OPROV_DEBUG_PLUGIN"

// debugLogs reports whether a provider read under -v is read at the debug level.
func (opts Options) debugLogs() bool {
	return opts.Debug || os.Getenv(debugPluginVariable) != ""
}

// providerLinesOnly is the go-plugin client's logger under -v: go-plugin logs each line of the
// provider's stderr through a logger named after the executable (Named), which is the real one;
// its own messages (through this base logger and the one it names "stdio") are dropped below
// Warn, so -v shows the provider's lines and not go-plugin's DEBUG and TRACE internals.
type providerLinesOnly struct{ hclog.Logger }

func (l providerLinesOnly) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn {
		l.Logger.Log(level, msg, args...)
	}
}
func (providerLinesOnly) Trace(string, ...any) {}
func (providerLinesOnly) Debug(string, ...any) {}
func (providerLinesOnly) Info(string, ...any)  {}

func (l providerLinesOnly) Named(name string) hclog.Logger {
	if name == "stdio" { // go-plugin's own: the stream that carries the provider's stdio
		return providerLinesOnly{l.Logger.Named(name)}
	}
	return noPluginServerLines{l.Logger.Named(name)}
}

// noPluginServerLines is the logger of a provider's own stderr lines under -v, less the lines
// go-plugin's server inside the provider logs there about itself ("plugin address" and the
// like, once per start): they reach oprov as the provider's lines, under its name (provider.3
// for a provider started from a verified file descriptor, provider.terraform-provider-NAME for
// one built from source, and oprov's own stdio host), but say nothing about the provider.
type noPluginServerLines struct{ hclog.Logger }

// pluginServerMessages are the messages go-plugin's server logs on the provider's stderr
// (server.go): they come with no @module, where the SDKs' lines and the provider's own tflog
// lines name theirs.
var pluginServerMessages = map[string]bool{
	"plugin address":                             true,
	"configuring server automatic mTLS":          true,
	"plugin received interrupt signal, ignoring": true,
}

// fromPluginServer reports whether a line the provider logged is go-plugin's server's own.
func fromPluginServer(msg string, args []any) bool {
	if !pluginServerMessages[msg] {
		return false
	}
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "@module" {
			return false
		}
	}
	return true
}

func (l noPluginServerLines) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn || !fromPluginServer(msg, args) {
		l.Logger.Log(level, msg, args...)
	}
}

func (l noPluginServerLines) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l noPluginServerLines) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l noPluginServerLines) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }

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
