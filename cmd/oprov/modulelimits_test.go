package main

import (
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/oci"
)

// TestModuleLimitsFromEnv: the module walk's bounds come from the environment, and a walk
// refused by one of them is told which variable raises it.
func TestModuleLimitsFromEnv(t *testing.T) {
	t.Setenv(envMaxModuleBytes, "8GiB")
	t.Setenv(envMaxModuleFiles, "300000")
	t.Setenv(envMaxModuleRatio, "500")
	t.Setenv(envMaxModuleCalls, "20000")
	l, err := moduleLimitsFromEnv()
	if err != nil || l.MaxBytes != 8<<30 || l.MaxTotalFiles != 300000 || l.MaxRatio != 500 || l.MaxCalls != 20000 {
		t.Fatalf("got %+v %v", l, err)
	}
	t.Setenv(envMaxModuleFiles, "lots")
	if _, err := moduleLimitsFromEnv(); err == nil || !strings.Contains(err.Error(), envMaxModuleFiles) {
		t.Errorf("a bad value: %v", err)
	}
	for s, env := range map[oci.Setting]string{module.SettingMaxModuleBytes: envMaxModuleBytes,
		module.SettingMaxModuleFiles: envMaxModuleFiles, module.SettingMaxModuleRatio: envMaxModuleRatio,
		module.SettingMaxModuleCalls: envMaxModuleCalls} {
		if a := advice(&oci.LimitError{What: "x", Limit: "y", Setting: s}); !strings.Contains(a, env) || !strings.Contains(a, string(s)) {
			t.Errorf("%s: advice %q does not name %s", s, a, env)
		}
	}
}
