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
	if env := providerEnv(Options{Type: "thing", Log: &bytes.Buffer{}}); slices.Contains(env, "TF_LOG_SDK=off") || slices.Contains(env, "TF_LOG_PROVIDER_THING=off") {
		t.Error("logs were switched off although oprov -v reads them")
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
