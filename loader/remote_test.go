package loader

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/tests/testkit/testfix"
)

// nearSide plays the near side of a connection against HostRemote: it reads the hello, sends
// req, sends the zip at zipPath when asked, and gives the far side's last answer and error.
func nearSide(t *testing.T, ho HostOptions, req plugin.RemoteRequest, zipPath string) (answer map[string]any, asked bool, hostErr error) {
	t.Helper()
	toFar, fromNear := io.Pipe()
	fromFar, toNear := io.Pipe()
	ho.In, ho.Out = toFar, toNear
	done := make(chan error, 1)
	go func() { done <- HostRemote(context.Background(), ho); toNear.Close() }()
	in := bufio.NewReader(fromFar)
	var hello plugin.RemoteHello
	line, err := in.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &hello) != nil || hello.Protocol != plugin.RemoteProtocol {
		t.Fatalf("hello: %q, %v", line, err)
	}
	req.Protocol = plugin.RemoteProtocol
	b, _ := json.Marshal(req)
	go fromNear.Write(append(b, '\n'))
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			t.Fatalf("the far side ended without an answer: %v", err)
		}
		answer = map[string]any{}
		if err := json.Unmarshal(line, &answer); err != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		if answer["send_zip"] == true {
			asked = true
			data, err := os.ReadFile(zipPath)
			if err != nil {
				t.Fatal(err)
			}
			go fromNear.Write(data)
			continue
		}
		break
	}
	fromNear.Close()
	select {
	case hostErr = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the far side did not end after refusing")
	}
	return answer, asked, hostErr
}

func hostRequest(t *testing.T, r *testfix.Release, h1 ...string) (plugin.RemoteRequest, string) {
	host := testfix.Host()
	zp := r.ZipPath(host)
	st, err := os.Stat(zp)
	if err != nil {
		t.Fatal(err)
	}
	return plugin.RemoteRequest{Address: "example.com/acme/hello", Version: r.Version, Platform: host.String(),
		Filename: "terraform-provider-hello_" + r.Version + "_" + host.String() + ".zip",
		Zip:      r.Zip(host).String(), Size: st.Size(), H1: h1}, zp
}

// The far side refuses a zip whose h1: is not one the near side's lock records, before anything
// is unpacked; with the lock's own h1: it goes on to launch.
func TestHostRefusesZipNotInLock(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	other := r.Republished(t)
	c := testfix.Cache(t)

	req, zp := hostRequest(t, r, other.H1(testfix.Host()))
	answer, asked, err := nearSide(t, HostOptions{Cache: c}, req, zp)
	if !asked || err == nil || !strings.Contains(answer["error"].(string), "is not one the near side's lock records") {
		t.Fatalf("a zip the lock does not record: asked %v, answer %v, err %v", asked, answer, err)
	}
	entries, _ := os.ReadDir(c.Dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "mirror") {
			if sub, _ := os.ReadDir(c.Dir + "/" + e.Name()); len(sub) > 0 {
				t.Errorf("something was unpacked for a refused zip: %s", e.Name())
			}
		}
	}

	req, zp = hostRequest(t, r, r.H1(testfix.Host()))
	answer, _, _ = nearSide(t, HostOptions{Cache: c}, req, zp)
	if msg, _ := answer["error"].(string); strings.Contains(msg, "lock records") || !strings.Contains(msg, "handshake") {
		t.Errorf("with the lock's h1: the far side should pass the check and try to launch (the fixture is no plugin): %v", answer)
	}
}

// A far side that requires a sandbox runs a request that carries none under the default
// sandbox: the fixture (a shell script, and sh is not in the default sandbox) is refused by the
// sandbox's exec rules, where it would otherwise start and fail the handshake.
func TestHostRequiresSandbox(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	req, zp := hostRequest(t, r, r.H1(testfix.Host()))
	answer, _, err := nearSide(t, HostOptions{Cache: testfix.Cache(t), RequireSandbox: true}, req, zp)
	msg, _ := answer["error"].(string)
	if err == nil || !strings.Contains(msg, "sandbox") {
		t.Fatalf("a request without a sandbox under --require-sandbox: answer %v, err %v", answer, err)
	}
}

// A hostile request (a version that is a path, a size that is not one, an address or platform
// that does not parse) is refused before anything is asked for or written.
func TestHostRefusesHostileRequests(t *testing.T) {
	r := testfix.NewRelease(t, "hello", "1.0.0", testfix.Host())
	for name, change := range map[string]func(*plugin.RemoteRequest){
		"version":  func(q *plugin.RemoteRequest) { q.Version = "../../../../tmp/x" },
		"size":     func(q *plugin.RemoteRequest) { q.Size = -1 },
		"address":  func(q *plugin.RemoteRequest) { q.Address = "example.com/../x" },
		"platform": func(q *plugin.RemoteRequest) { q.Platform = "../linux_amd64" },
		"digest":   func(q *plugin.RemoteRequest) { q.Zip = "sha256:../../x" },
	} {
		t.Run(name, func(t *testing.T) {
			c := testfix.Cache(t)
			req, zp := hostRequest(t, r, r.H1(testfix.Host()))
			change(&req)
			answer, asked, err := nearSide(t, HostOptions{Cache: c}, req, zp)
			if asked || err == nil || answer["error"] == nil {
				t.Fatalf("a hostile %s: asked %v, answer %v, err %v", name, asked, answer, err)
			}
		})
	}
}
