package oci

import (
	"errors"
	"net/http"
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

// TestLimitsDefaultsAndSetting: a limit left at zero is the default, and a refusal names the
// setting that raises it (the CLI says which flag and variable that is).
func TestLimitsDefaultsAndSetting(t *testing.T) {
	l := Limits{MaxPackageSize: 7}.WithDefaults()
	if l.MaxPackageSize != 7 || l.StallTimeout != DefaultLimits().StallTimeout || l.MaxTags != DefaultLimits().MaxTags {
		t.Fatalf("WithDefaults = %+v", l)
	}
	err := l.CheckBlobSize("the zip", 8)
	var le *LimitError
	if !errors.As(err, &le) || le.Setting != SettingMaxPackageSize || !strings.Contains(err.Error(), "the zip is 8 bytes, over the maximum package size of 7 bytes") {
		t.Errorf("CheckBlobSize over the limit: %v", err)
	}
	if err := l.CheckBlobSize("the zip", 7); err != nil {
		t.Errorf("CheckBlobSize at the limit: %v", err)
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

// TestNilClientHasDefaults: a service given no client uses the default policy and limits.
func TestNilClientHasDefaults(t *testing.T) {
	var c *Client
	if c.Bounds() != DefaultLimits() {
		t.Errorf("nil client bounds: %+v", c.Bounds())
	}
	if _, err := c.Transport(); err != nil {
		t.Errorf("nil client transport: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	c.SetUserAgent(req)
	if req.Header.Get("User-Agent") != "oprov" {
		t.Errorf("user agent %q", req.Header.Get("User-Agent"))
	}
	(&Client{UserAgent: "oprov/9"}).SetUserAgent(req)
	if req.Header.Get("User-Agent") != "oprov/9" {
		t.Errorf("user agent %q", req.Header.Get("User-Agent"))
	}
}
