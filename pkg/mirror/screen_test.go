package mirror

import (
	"context"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/testorigin"
)

// protocolOrigin serves 0.9.0 (protocol 4 only), 1.0.0 (5.0), 1.1.0 (4.0 and 5.1) and 1.2.0
// (6.0).
func protocolOrigin(t *testing.T) (*testorigin.Origin, Options) {
	t.Helper()
	org, ca := testOrigin(t)
	for _, v := range []string{"0.9.0", "1.1.0", "1.2.0"} {
		org.AddVersion(t, testorigin.FakeRelease(t, "hello", v, "linux_amd64"), v)
	}
	org.SetFaults(testorigin.Faults{Protocols: map[string][]string{"0.9.0": {"4.0"}, "1.0.0": {"5.0"}, "1.1.0": {"4.0", "5.1"}, "1.2.0": {"6.0"}}})
	_, to := layout(t)
	return org, mirrorOptions(org, ca, to)
}

// TestMirrorSkipsUnlaunchableVersionsOfARange: mirroring every version leaves out the one that
// speaks protocol 4 only, with a warning naming it and its protocol, and mirrors the rest.
func TestMirrorSkipsUnlaunchableVersionsOfARange(t *testing.T) {
	_, opts := protocolOrigin(t)
	target, _ := layout(t)
	var warnings []string
	opts.Warn = func(msg string) { warnings = append(warnings, msg) }
	res, err := Mirror(context.Background(), target, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res {
		got = append(got, m.Version)
	}
	if strings.Join(got, " ") != "1.0.0 1.1.0 1.2.0" {
		t.Errorf("mirrored %v", got)
	}
	want := opts.Address.String() + ": version 0.9.0 is left out: it speaks plugin protocol 4.0 only"
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
		t.Errorf("warnings %q, want one starting %q", warnings, want)
	}
}

// TestMirrorRefusesUnlaunchableProtocols: a version asked for alone that speaks protocol 4 only,
// a malformed protocol string in a version asked for, and a download answer whose protocols
// disagree with the versions list are refused with nothing pushed; a malformed string in a
// version not asked for does not matter.
func TestMirrorRefusesUnlaunchableProtocols(t *testing.T) {
	org, opts := protocolOrigin(t)
	for _, tc := range []struct {
		name, constraint string
		faults           testorigin.Faults
		want             string
	}{
		{"one version", "0.9.0", testorigin.Faults{Protocols: map[string][]string{"0.9.0": {"4.0"}}},
			"version 0.9.0 speaks plugin protocol 4.0 only; oprov (like OpenTofu) launches providers over protocol 5 or 6 (nothing was pushed)"},
		{"every version in the range", "< 1.1", testorigin.Faults{Protocols: map[string][]string{"0.9.0": {"4.0"}, "1.0.0": {"3.0", "4.1"}}},
			"no version asked for speaks a plugin protocol oprov can launch: 0.9.0 (4.0), 1.0.0 (3.0, 4.1)"},
		{"malformed", ">= 1.0", testorigin.Faults{Protocols: map[string][]string{"1.2.0": {"6.0", "latest"}}},
			`malformed plugin protocol "latest" for version 1.2.0 (nothing was pushed)`},
		{"download answer", "1.0.0", testorigin.Faults{DownloadProtocols: map[string][]string{"1.0.0": {"4.0"}}},
			"download answer: version 1.0.0 speaks plugin protocol 4.0 only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org.SetFaults(tc.faults)
			target, to := layout(t)
			opts.To, opts.Constraint = to, tc.constraint
			opts.Platforms = nil
			_, err := Mirror(context.Background(), target, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			t.Logf("%v", err)
			assertEmpty(t, target, to)
		})
	}
	org.SetFaults(testorigin.Faults{Protocols: map[string][]string{"1.2.0": {"latest"}}})
	target, to := layout(t)
	opts.To, opts.Constraint = to, "1.0.0"
	if _, err := Mirror(context.Background(), target, opts); err != nil {
		t.Errorf("a malformed protocol in a version not asked for: %v", err)
	}
}
