package main

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/recording"
)

// TestRecordingLimitsFromEnv: a recording's bounds come from the environment, a bad value is
// refused naming its variable, and a recording refused by one of them is told which variable
// raises it.
func TestRecordingLimitsFromEnv(t *testing.T) {
	t.Setenv(envMaxRecordingSize, "4GiB")
	t.Setenv(envMaxRecordingCalls, "2000000")
	t.Setenv(envMaxRecordingLine, "512MiB")
	l, err := recordingLimitsFromEnv()
	if err != nil || l.MaxBytes != 4<<30 || l.MaxCalls != 2000000 || l.MaxLine != 512<<20 {
		t.Fatalf("got %+v %v", l, err)
	}
	for _, env := range []string{envMaxRecordingSize, envMaxRecordingCalls, envMaxRecordingLine} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "lots")
			if _, err := recordingLimitsFromEnv(); err == nil || !strings.Contains(err.Error(), env) {
				t.Errorf("a bad value: %v", err)
			}
		})
	}
	for s, env := range map[oci.Setting]string{recording.SettingMaxRecordingBytes: envMaxRecordingSize,
		recording.SettingMaxRecordingCalls: envMaxRecordingCalls, recording.SettingMaxRecordingLine: envMaxRecordingLine} {
		if a := advice(&oci.LimitError{What: "x", Limit: "y", Setting: s}); !strings.Contains(a, env) || !strings.Contains(a, string(s)) {
			t.Errorf("%s: advice %q does not name %s", s, a, env)
		}
	}
}
