package origin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/manifest"
	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/tfcreds"
	"github.com/oprov/oprov/tests/testkit/testca"
	"github.com/oprov/oprov/tests/testkit/testorigin"
	"github.com/oprov/oprov/tests/testkit/tfcredstest"
)

// fastRetries shortens the retry policy and the answer timeout for one test.
func fastRetries(t *testing.T) {
	t.Helper()
	policy, timeout := defaultRetry, responseHeaderTimeout
	defaultRetry = retryPolicy{attempts: 5, first: 5 * time.Millisecond, maxWait: 2 * time.Second, budget: 4 * time.Second}
	responseHeaderTimeout = 300 * time.Millisecond
	t.Cleanup(func() { defaultRetry, responseHeaderTimeout = policy, timeout })
}

// testOrigin serves acme/hello 1.0.0 for linux_amd64 and darwin_arm64 from a fake release, with
// no token in the environment or CLI configuration that could leak in from the machine.
func testOrigin(t *testing.T) (*testorigin.Origin, *testca.CA) {
	t.Helper()
	tfcredstest.Isolate(t, tfcreds.EnvPrefix)
	ca := testca.NewCA(t, t.TempDir())
	org := testorigin.Start(t, ca, testorigin.FakeRelease(t, "hello", "1.0.0", "linux_amd64", "darwin_arm64"), "acme", "hello", "1.0.0")
	return org, ca
}

func newTestOrigin(t *testing.T, org *testorigin.Origin, ca *testca.CA) *Client {
	t.Helper()
	o, err := newClient(context.Background(), org.Host, oci.NewClient(oci.Options{CAFile: ca.File}))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

var linuxAMD64 = manifest.Platform{OS: "linux", Arch: "amd64"}

// zipOf gives the URL of a version's linux_amd64 zip, and its sha256 from the origin's answer.
func zipOf(t *testing.T, o *Client, version string) (string, string) {
	t.Helper()
	d, err := o.Download(context.Background(), "acme", "hello", version, linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	u, err := d.Resolve(d.DownloadURL)
	if err != nil {
		t.Fatal(err)
	}
	return u, d.SHASum
}

// TestOriginProtocol: discovery, the versions list, a download answer (its relative URLs
// resolved against the answer's own URL) and the zip it names, whose bytes match its shasum.
func TestOriginProtocol(t *testing.T) {
	org, ca := testOrigin(t)
	o := newTestOrigin(t, org, ca)
	if o.base.String() != "https://"+org.Host+"/v1/providers/" {
		t.Errorf("providers.v1 base: %s", o.base)
	}
	vs, err := o.Versions(context.Background(), "acme", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].Version != "1.0.0" || len(vs[0].Platforms) != 2 || strings.Join(vs[0].Protocols, ",") != "5.0,6.0" {
		t.Errorf("versions: %+v", vs)
	}
	d, err := o.Download(context.Background(), "acme", "hello", "1.0.0", linuxAMD64)
	if err != nil {
		t.Fatal(err)
	}
	if d.Filename != "terraform-provider-hello_1.0.0_linux_amd64.zip" || len(d.SigningKeys.GPGPublicKeys) != 1 {
		t.Errorf("download answer: %+v", d)
	}
	u, sum := zipOf(t, o, "1.0.0")
	if want := "https://" + org.Host + "/files/" + d.Filename; u != want {
		t.Errorf("download_url resolved to %s, want %s", u, want)
	}
	var buf bytes.Buffer
	n, err := o.Fetch(context.Background(), u, &buf, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(buf.Bytes()); n != int64(buf.Len()) || hex.EncodeToString(h[:]) != sum {
		t.Errorf("fetched %d bytes with sha256 %x, want %s", n, h, sum)
	}
	if _, err := o.Download(context.Background(), "acme", "hello", "1.0.0", manifest.Platform{OS: "plan9", Arch: "amd64"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a platform the origin lacks: %v", err)
	}
}

// TestResolve: the answer's URLs resolve as RFC 3986 says, against the answer's own URL.
func TestResolve(t *testing.T) {
	base, _ := url.Parse("https://reg.example.com/v1/providers/acme/hello/1.0.0/download/linux/amd64")
	d := &Download{url: base}
	for ref, want := range map[string]string{
		"/files/a.zip":                    "https://reg.example.com/files/a.zip",
		"../../a.zip":                     "https://reg.example.com/v1/providers/acme/hello/1.0.0/a.zip",
		"a.zip":                           "https://reg.example.com/v1/providers/acme/hello/1.0.0/download/linux/a.zip",
		"https://cdn.example.net/x/a.zip": "https://cdn.example.net/x/a.zip",
		"//cdn.example.net/a.zip":         "https://cdn.example.net/a.zip",
	} {
		if got, err := d.Resolve(ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := d.Resolve("https://bad host/"); err == nil {
		t.Error("a malformed URL resolved")
	}
}

// requestsDuring counts the requests the origin gets while f runs.
func requestsDuring(org *testorigin.Origin, f func()) int {
	before := len(org.Requests())
	f()
	return len(org.Requests()) - before
}

// TestRetries: failures that may pass are tried again until the origin answers: 503, 429 with
// Retry-After, a dropped connection, an answer cut off halfway, and one that does not start in
// time.
func TestRetries(t *testing.T) {
	fastRetries(t)
	org, ca := testOrigin(t)
	o := newTestOrigin(t, org, ca)
	for _, tc := range []struct {
		name   string
		faults testorigin.Faults
		want   int // requests in all
	}{
		{"503 twice", testorigin.Faults{FailNext: 2}, 3},
		{"500 twice", testorigin.Faults{FailNext: 2, FailStatus: http.StatusInternalServerError}, 3},
		{"429 with Retry-After", testorigin.Faults{FailNext: 1, FailStatus: http.StatusTooManyRequests, RetryAfter: "0"}, 2},
		{"connection dropped", testorigin.Faults{DropNext: 2}, 3},
		{"answer cut off", testorigin.Faults{TruncateNext: 2}, 3},
		{"no answer in time", testorigin.Faults{StallNext: 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org.SetFaults(tc.faults)
			defer org.SetFaults(testorigin.Faults{})
			var vs []Version
			var err error
			n := requestsDuring(org, func() { vs, err = o.Versions(context.Background(), "acme", "hello") })
			if err != nil || len(vs) != 1 {
				t.Fatalf("%v, %+v", err, vs)
			}
			if n != tc.want {
				t.Errorf("%d requests, want %d", n, tc.want)
			}
		})
	}
}

// TestRetryLimits: the client gives up after the attempts allowed, does not retry a 4xx other
// than 429, refuses a Retry-After longer than it waits, and stops waiting when cancelled.
func TestRetryLimits(t *testing.T) {
	fastRetries(t)
	org, ca := testOrigin(t)
	o := newTestOrigin(t, org, ca)
	versions := func(ctx context.Context) error { _, err := o.Versions(ctx, "acme", "hello"); return err }
	for _, tc := range []struct {
		name   string
		faults testorigin.Faults
		want   string
		calls  int
	}{
		{"503 for ever", testorigin.Faults{FailNext: 100}, "503 Service Unavailable (gave up after 5 attempts)", 5},
		{"404", testorigin.Faults{FailNext: 3, FailStatus: http.StatusNotFound}, "404 Not Found", 1},
		{"400", testorigin.Faults{FailNext: 3, FailStatus: http.StatusBadRequest}, "400 Bad Request", 1},
		{"501", testorigin.Faults{FailNext: 3, FailStatus: http.StatusNotImplemented}, "501 Not Implemented", 1},
		{"Retry-After an hour", testorigin.Faults{FailNext: 3, FailStatus: http.StatusTooManyRequests, RetryAfter: "3600"}, "asks to wait 1h0m0s", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			org.SetFaults(tc.faults)
			defer org.SetFaults(testorigin.Faults{})
			var err error
			n := requestsDuring(org, func() { err = versions(context.Background()) })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if n != tc.calls {
				t.Errorf("%d requests, want %d", n, tc.calls)
			}
		})
	}
	t.Run("Retry-After is waited for", func(t *testing.T) {
		org.SetFaults(testorigin.Faults{FailNext: 1, RetryAfter: "1"})
		defer org.SetFaults(testorigin.Faults{})
		start := time.Now()
		if err := versions(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < time.Second {
			t.Errorf("retried after %s, before the second Retry-After asked for", d)
		}
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		org.SetFaults(testorigin.Faults{FailNext: 100, RetryAfter: "2"})
		defer org.SetFaults(testorigin.Faults{})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := versions(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
			t.Errorf("after %s: %v", time.Since(start), err)
		}
	})
}

// TestFetchRetriesOnlyBeforeTheFirstByte: a zip is fetched again after a 503, byte for byte once;
// a body cut off after bytes reached the writer fails without a retry (which would write them
// twice), and a body over the limit is refused.
func TestFetchRetriesOnlyBeforeTheFirstByte(t *testing.T) {
	fastRetries(t)
	org, ca := testOrigin(t)
	o := newTestOrigin(t, org, ca)
	u, sum := zipOf(t, o, "1.0.0")
	ctx := context.Background()

	org.SetFaults(testorigin.Faults{FailNext: 2})
	var buf bytes.Buffer
	if _, err := o.Fetch(ctx, u, &buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	if h := sha256.Sum256(buf.Bytes()); hex.EncodeToString(h[:]) != sum {
		t.Errorf("after retries the zip has sha256 %x, want %s", h, sum)
	}
	size := buf.Len()

	org.SetFaults(testorigin.Faults{TruncateNext: 1})
	buf.Reset()
	var err error
	n := requestsDuring(org, func() { _, err = o.Fetch(ctx, u, &buf, 1<<20) })
	if err == nil || n != 1 {
		t.Errorf("a body cut off after bytes were written: %d requests, error %v", n, err)
	}
	if buf.Len() != size/2 {
		t.Errorf("the writer got %d bytes of a %d-byte zip cut at %d", buf.Len(), size, size/2)
	}

	org.SetFaults(testorigin.Faults{})
	if _, err := o.Fetch(ctx, u, &bytes.Buffer{}, 10); err == nil || !strings.Contains(err.Error(), "more than 10 bytes") {
		t.Errorf("an oversize body: %v", err)
	}
	if _, err := o.Fetch(ctx, strings.Replace(u, "https:", "http:", 1)+"x", &bytes.Buffer{}, 10); err == nil {
		t.Errorf("plain http to a TLS origin worked")
	}
	if _, err := o.Fetch(ctx, "http://example.com/a.zip", &bytes.Buffer{}, 10); err == nil || !strings.Contains(err.Error(), "only https") {
		t.Errorf("plain http to a remote host: %v", err)
	}
}
