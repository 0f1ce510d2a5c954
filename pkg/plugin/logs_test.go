package plugin

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestWithQuietLogs(t *testing.T) {
	settings := []string{"TF_LOG_SDK=off", "TF_LOG_PROVIDER_ACME_THING=off"}
	got := withQuietLogs([]string{"HOME=/h", "TF_LOG_PROVIDER_ACME_THING=debug"}, settings...)
	want := []string{"HOME=/h", "TF_LOG_PROVIDER_ACME_THING=debug", "TF_LOG_SDK=off"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (the user's TF_LOG_PROVIDER_ACME_THING stands)", got, want)
	}
	// A variable whose name only starts the same is not the same variable.
	if got := withQuietLogs([]string{"TF_LOG_SDK_PROTO=trace"}, settings...); !slices.Contains(got, "TF_LOG_SDK=off") {
		t.Errorf("TF_LOG_SDK_PROTO was taken for TF_LOG_SDK: %v", got)
	}
	// The provider's own setting is named after its type, as terraform-plugin-go reads it.
	if env := providerEnv(Options{Type: "acme-thing"}); !slices.Contains(env, "TF_LOG_PROVIDER_ACME_THING=off") || !slices.Contains(env, "TF_LOG_SDK=off") {
		t.Errorf("environment lacks the quiet settings: %v", env[max(0, len(env)-3):])
	}
	// -v reads the provider's own lines; its SDK's request logs stay off but at the debug level.
	t.Setenv(debugPluginVariable, "")
	if env := providerEnv(Options{Type: "thing", Log: &bytes.Buffer{}}); !slices.Contains(env, "TF_LOG_SDK=off") || slices.Contains(env, "TF_LOG_PROVIDER_THING=off") {
		t.Errorf("under -v: want TF_LOG_SDK=off and the provider's own logs on: %v", env[max(0, len(env)-3):])
	}
	if env := providerEnv(Options{Type: "thing", Log: &bytes.Buffer{}, Debug: true}); slices.Contains(env, "TF_LOG_SDK=off") || slices.Contains(env, "TF_LOG_PROVIDER_THING=off") {
		t.Error("logs were switched off although oprov -vv reads them")
	}
}

// TestPluginServerLinesDropped: under -v, the lines go-plugin's server logs on the provider's
// stderr about itself are dropped (they reach the provider's logger), the provider's and its
// SDK's lines with the same words are not, and warnings always pass.
func TestPluginServerLinesDropped(t *testing.T) {
	var buf bytes.Buffer
	l := providerLinesOnly{hclog.New(&hclog.LoggerOptions{Name: "provider", Output: &buf, Level: hclog.Trace})}.Named("3")
	l.Debug("plugin address", "address", "/tmp/x/plugin1", "network", "unix", "timestamp", "t")
	l.Info("configuring server automatic mTLS", "timestamp", "t")
	l.Debug("plugin address", "@module", "provider", "address", "mine")
	l.Trace("Served request", "@module", "sdk.proto")
	l.Warn("plugin address", "address", "warned")
	got := buf.String()
	if strings.Contains(got, "/tmp/x/plugin1") || strings.Contains(got, "mTLS") {
		t.Errorf("go-plugin's server lines passed:\n%s", got)
	}
	for _, want := range []string{"address=mine", "Served request", "address=warned"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q was dropped:\n%s", want, got)
		}
	}
}

// The tail is the last max bytes of everything written, whatever the sizes of the writes.
func TestTailBuffer(t *testing.T) {
	for _, size := range []int{1, 7, 100, 4095, 4096, 5000} {
		tb := &tailBuffer{max: 4096}
		var all []byte
		for i := 0; len(all) < 50_000; i++ {
			line := []byte(fmt.Sprintf("%0*d\n", size, i))
			all = append(all, line...)
			tb.Write(line)
			if want := all[max(0, len(all)-4096):]; tb.String() != string(want) {
				t.Fatalf("writes of %d: after %d bytes the tail is %d bytes, not the last %d", size, len(all), len(tb.String()), len(want))
			}
		}
		if cap(tb.buf) > 2*4096 {
			t.Errorf("writes of %d: the buffer grew to %d", size, cap(tb.buf))
		}
	}
}

// TestProviderLinesOnly: under -v the provider's own lines (logged by go-plugin through a logger
// named after the executable) show; go-plugin's own DEBUG and TRACE messages do not.
func TestProviderLinesOnly(t *testing.T) {
	var out bytes.Buffer
	l := providerLinesOnly{hclog.New(&hclog.LoggerOptions{Name: "provider", Output: &out, Level: hclog.Trace})}
	l.Debug("starting plugin", "args", []string{"a long argument list"})
	l.Named("stdio").Trace("waiting for stdio data")
	l.Log(hclog.Debug, "plugin started")
	l.Named("terraform-provider-hello").Debug("the provider's own line")
	l.Warn("plugin failed to exit gracefully")
	got := out.String()
	for _, not := range []string{"starting plugin", "waiting for stdio data", "plugin started"} {
		if strings.Contains(got, not) {
			t.Errorf("go-plugin's own %q shows:\n%s", not, got)
		}
	}
	for _, want := range []string{"the provider's own line", "failed to exit gracefully"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q is missing:\n%s", want, got)
		}
	}
}
