package oci

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Limits bound what a registry can make oprov do: how long it may stay silent, how large a package
// and how long a platform or tag list it may serve. A registry that lies or stalls meets one of
// them and gets a clear error naming the knob that raises it; it never decides how long oprov
// runs or how much it writes.
type Limits struct {
	// StallTimeout bounds connecting, the TLS handshake and waiting for response headers, and is
	// the window in which a body must make progress (at least minProgress bytes).
	StallTimeout time.Duration
	// MaxPackageSize is the largest zip (or other blob) oprov fetches; a larger descriptor is
	// refused before any byte is fetched.
	MaxPackageSize int64
	// MaxPlatforms caps the entries of a version's index.
	MaxPlatforms int
	// MaxTags and MaxTagPages cap a repository's tag listing.
	MaxTags     int
	MaxTagPages int
}

// minProgress is how many bytes a body must move in every StallTimeout window: a registry that
// trickles a byte every few seconds has stopped answering as surely as a silent one.
const minProgress = 1024

// DefaultLimits are far above what any real registry and provider need.
func DefaultLimits() Limits {
	return Limits{
		StallTimeout:   30 * time.Second,
		MaxPackageSize: 2 << 30,
		MaxPlatforms:   1000,
		MaxTags:        100000,
		MaxTagPages:    1000,
	}
}

// WithDefaults gives l with the default in place of every limit left at zero.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.StallTimeout <= 0 {
		l.StallTimeout = d.StallTimeout
	}
	if l.MaxPackageSize <= 0 {
		l.MaxPackageSize = d.MaxPackageSize
	}
	if l.MaxPlatforms <= 0 {
		l.MaxPlatforms = d.MaxPlatforms
	}
	if l.MaxTags <= 0 {
		l.MaxTags = d.MaxTags
	}
	if l.MaxTagPages <= 0 {
		l.MaxTagPages = d.MaxTagPages
	}
	return l
}

// ParseDuration parses a positive duration: Go's form (30s, 2m, 1m30s) or whole seconds.
func ParseDuration(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		s = strconv.Itoa(n) + "s"
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 30s or 2m")
	}
	return d, nil
}

// ParseSize parses a positive byte count: a whole number with an optional unit (KB, MB, GB,
// TB in powers of 1000; KiB, MiB, GiB, TiB in powers of 1024).
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("want a positive size such as 2GiB or 500MB")
	}
	return n * mult, nil
}

// FormatSize renders a byte count in the largest binary unit it reaches, to one decimal.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult {
			return strings.TrimSuffix(strconv.FormatFloat(float64(n)/float64(u.mult), 'f', 1, 64), ".0") + " " + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// Setting names one of the limits, so that the program that set it can say how to raise it.
type Setting string

// The limits, one a field of Limits.
const (
	SettingStallTimeout   Setting = "stall timeout"
	SettingMaxPackageSize Setting = "maximum package size"
	SettingMaxPlatforms   Setting = "maximum platforms"
	SettingMaxTags        Setting = "maximum tags"
	SettingMaxTagPages    Setting = "maximum tag pages"
)

// LimitError is a registry's answer refused for going over one of the limits.
type LimitError struct {
	What    string  // what went over, such as "the linux_amd64 package is 1 TiB"
	Limit   string  // the limit, such as "the maximum package size of 2 GiB"
	Setting Setting // which limit, to raise
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s, over %s (raise the %s if that is expected)", e.What, e.Limit, e.Setting)
}

// CheckBlobSize refuses a blob whose descriptor says it is larger than the maximum package size,
// before any byte of it is fetched. name says which blob, for the message.
func (l Limits) CheckBlobSize(name string, size int64) error {
	if size > l.MaxPackageSize {
		return &LimitError{
			What:    fmt.Sprintf("%s is %s", name, FormatSize(size)),
			Limit:   "the maximum package size of " + FormatSize(l.MaxPackageSize),
			Setting: SettingMaxPackageSize,
		}
	}
	return nil
}
