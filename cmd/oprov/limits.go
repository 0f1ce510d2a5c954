package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/oprov/oprov/pkg/module"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/recording"
)

// The knobs of the registry limits (oci.Limits): each an environment variable, the first two a
// flag as well, which wins.
const (
	envStallTimeout   = "OPROV_STALL_TIMEOUT"
	envMaxPackageSize = "OPROV_MAX_PACKAGE_SIZE"
	envMaxPlatforms   = "OPROV_MAX_PLATFORMS"
	envMaxTags        = "OPROV_MAX_TAGS"
	envMaxTagPages    = "OPROV_MAX_TAG_PAGES"

	// The module walk's bounds (module.Limits).
	envMaxModuleBytes = "OPROV_MAX_MODULE_BYTES"
	envMaxModuleFiles = "OPROV_MAX_MODULE_FILES"
	envMaxModuleRatio = "OPROV_MAX_MODULE_RATIO"
	envMaxModuleCalls = "OPROV_MAX_MODULE_CALLS"

	// A recording's bounds (recording.Limits).
	envMaxRecordingSize  = "OPROV_MAX_RECORDING_SIZE"
	envMaxRecordingCalls = "OPROV_MAX_RECORDING_CALLS"
	envMaxRecordingLine  = "OPROV_MAX_RECORDING_LINE"

	flagStallTimeout   = "--stall-timeout"
	flagMaxPackageSize = "--max-package-size"
)

// knobs says, for each limit, how a user raises it.
var knobs = map[oci.Setting]string{
	oci.SettingStallTimeout:   flagStallTimeout + " or " + envStallTimeout,
	oci.SettingMaxPackageSize: flagMaxPackageSize + " or " + envMaxPackageSize,
	oci.SettingMaxPlatforms:   envMaxPlatforms,
	oci.SettingMaxTags:        envMaxTags,
	oci.SettingMaxTagPages:    envMaxTagPages,

	module.SettingMaxModuleBytes: envMaxModuleBytes + " (such as 8GiB)",
	module.SettingMaxModuleFiles: envMaxModuleFiles,
	module.SettingMaxModuleRatio: envMaxModuleRatio,
	module.SettingMaxModuleCalls: envMaxModuleCalls,

	recording.SettingMaxRecordingBytes: envMaxRecordingSize + " (such as 4GiB)",
	recording.SettingMaxRecordingCalls: envMaxRecordingCalls,
	recording.SettingMaxRecordingLine:  envMaxRecordingLine + " (such as 512MiB)",
}

// limitAdvice says how to raise the limit an error ran into, or "".
func limitAdvice(err error) string {
	var le *oci.LimitError
	var se *oci.StallError
	switch {
	case errors.As(err, &le):
		return fmt.Sprintf("to raise the %s, use %s", le.Setting, knobs[le.Setting])
	case errors.As(err, &se):
		return fmt.Sprintf("if the registry is only slow, raise the %s with %s", oci.SettingStallTimeout, knobs[oci.SettingStallTimeout])
	}
	return ""
}

// limitFlags are the bounds every command puts on what a registry can make it do (see
// oci.Limits); the environment's OPROV_* variables set them too, and the flags win.
type limitFlags struct {
	StallTimeout   string
	MaxPackageSize string
}

// registerLimits adds the limit flags to every command, and gives the limits to the factory
// that builds the command's registry client.
func registerLimits(root *cobra.Command, deps *Factory) {
	f := &limitFlags{}
	root.PersistentFlags().StringVar(&f.StallTimeout, "stall-timeout", "", "how long a registry may stay silent (connect, TLS, headers, or a body moving under 1 KiB) before oprov gives up (default 30s, or $"+envStallTimeout+")")
	root.PersistentFlags().StringVar(&f.MaxPackageSize, "max-package-size", "", "largest provider package oprov fetches (default 2GiB, or $"+envMaxPackageSize+")")
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		l, err := f.limits()
		if err != nil {
			return &usageError{err: err}
		}
		deps.Limits = l
		if deps.ModuleLimits, err = moduleLimitsFromEnv(); err != nil {
			return &usageError{err: err}
		}
		if deps.RecordingLimits, err = recordingLimitsFromEnv(); err != nil {
			return &usageError{err: err}
		}
		return nil
	}
}

// moduleLimitsFromEnv gives the module walk's bounds the environment sets; the rest are left
// at zero, which module.Walk takes as its defaults.
func moduleLimitsFromEnv() (module.Limits, error) {
	var l module.Limits
	if v := os.Getenv(envMaxModuleBytes); v != "" {
		n, err := oci.ParseSize(v)
		if err != nil {
			return l, fmt.Errorf("%s=%s: %w", envMaxModuleBytes, v, err)
		}
		l.MaxBytes = n
	}
	for _, e := range []struct {
		name string
		set  func(int)
	}{{envMaxModuleFiles, func(n int) { l.MaxTotalFiles = n }}, {envMaxModuleRatio, func(n int) { l.MaxRatio = int64(n) }},
		{envMaxModuleCalls, func(n int) { l.MaxCalls = n }}} {
		if v := os.Getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return l, fmt.Errorf("%s=%s: want a positive whole number", e.name, v)
			}
			e.set(n)
		}
	}
	return l, nil
}

// recordingLimitsFromEnv gives a recording's bounds the environment sets; the rest are left at
// zero, which recording.Read takes as its defaults.
func recordingLimitsFromEnv() (recording.Limits, error) {
	var l recording.Limits
	for _, e := range []struct {
		name string
		set  func(int64)
	}{{envMaxRecordingSize, func(n int64) { l.MaxBytes = n }}, {envMaxRecordingLine, func(n int64) { l.MaxLine = int(min(n, 1<<40)) }}} {
		if v := os.Getenv(e.name); v != "" {
			n, err := oci.ParseSize(v)
			if err != nil {
				return l, fmt.Errorf("%s=%s: %w", e.name, v, err)
			}
			e.set(n)
		}
	}
	if v := os.Getenv(envMaxRecordingCalls); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return l, fmt.Errorf("%s=%s: want a positive whole number", envMaxRecordingCalls, v)
		}
		l.MaxCalls = n
	}
	return l, nil
}

func (f *limitFlags) limits() (oci.Limits, error) {
	l, err := limitsFromEnv()
	if err != nil {
		return l, err
	}
	if f.StallTimeout != "" {
		if l.StallTimeout, err = oci.ParseDuration(f.StallTimeout); err != nil {
			return l, errors.New(flagStallTimeout + " " + f.StallTimeout + ": " + err.Error())
		}
	}
	if f.MaxPackageSize != "" {
		if l.MaxPackageSize, err = oci.ParseSize(f.MaxPackageSize); err != nil {
			return l, errors.New(flagMaxPackageSize + " " + f.MaxPackageSize + ": " + err.Error())
		}
	}
	return l, nil
}

// limitsFromEnv gives the default limits with the environment's overrides applied.
func limitsFromEnv() (oci.Limits, error) {
	l := oci.DefaultLimits()
	if v := os.Getenv(envStallTimeout); v != "" {
		d, err := oci.ParseDuration(v)
		if err != nil {
			return l, fmt.Errorf("%s=%s: %w", envStallTimeout, v, err)
		}
		l.StallTimeout = d
	}
	if v := os.Getenv(envMaxPackageSize); v != "" {
		n, err := oci.ParseSize(v)
		if err != nil {
			return l, fmt.Errorf("%s=%s: %w", envMaxPackageSize, v, err)
		}
		l.MaxPackageSize = n
	}
	for _, e := range []struct {
		name string
		into *int
	}{{envMaxPlatforms, &l.MaxPlatforms}, {envMaxTags, &l.MaxTags}, {envMaxTagPages, &l.MaxTagPages}} {
		if v := os.Getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return l, fmt.Errorf("%s=%s: want a positive whole number", e.name, v)
			}
			*e.into = n
		}
	}
	return l, nil
}

// interrupted says whether a command ended because the user interrupted it (Ctrl-C, SIGTERM).
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, context.Canceled)
}
