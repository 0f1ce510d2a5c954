package oci

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"2GiB": 2 << 30, "500MB": 500e6, "1 TiB": 1 << 40, "1024": 1024, "7B": 7, "3KiB": 3072} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "GiB", "1.5GiB", "9999999999TiB", "2 XB"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "2m": 2 * time.Minute, "45": 45 * time.Second} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-3s", "soon"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) accepted", in)
		}
	}
}

// TestLimitsFromEnvAndContext: the environment overrides the defaults, a malformed value is an
// error that names the variable, and a context's limits win over both.
func TestLimitsFromEnvAndContext(t *testing.T) {
	t.Setenv(EnvStallTimeout, "5s")
	t.Setenv(EnvMaxTags, "10")
	l, err := LimitsFromEnv()
	if err != nil || l.StallTimeout != 5*time.Second || l.MaxTags != 10 || l.MaxPackageSize != DefaultLimits().MaxPackageSize {
		t.Fatalf("LimitsFromEnv = %+v, %v", l, err)
	}
	t.Setenv(EnvMaxPlatforms, "many")
	if _, err := LimitsFromEnv(); err == nil || !strings.Contains(err.Error(), EnvMaxPlatforms) {
		t.Errorf("a malformed %s gave %v", EnvMaxPlatforms, err)
	}
	ctx := WithLimits(context.Background(), Limits{MaxPackageSize: 7})
	if got := LimitsFrom(ctx).MaxPackageSize; got != 7 {
		t.Errorf("the context's limit was not used: %d", got)
	}
	err = LimitsFrom(ctx).CheckBlobSize("the zip", 8)
	if err == nil || !strings.Contains(err.Error(), FlagMaxPackageSize) || !strings.Contains(err.Error(), EnvMaxPackageSize) {
		t.Errorf("CheckBlobSize over the limit: %v", err)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"2GiB", "500MB", "1", "0", "-5KiB", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n <= 0 {
			t.Errorf("ParseSize(%q) = %d without an error", s, n)
		}
	})
}
