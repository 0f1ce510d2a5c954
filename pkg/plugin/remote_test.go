package plugin

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Faults at the opening end within a bound with an error naming the remote and the cause, and the
// far side's last stderr lines: a far side without oprov, one that speaks another protocol
// version, one that prints something else, and one that refuses the request.
func TestRemoteStartFaults(t *testing.T) {
	req := func(string) (*RemoteRequest, error) { return &RemoteRequest{Address: "example.com/acme/x"}, nil }
	for _, c := range []struct {
		name, script string
		want         []string
	}{
		{"no oprov", `echo "sh: 1: oprov: not found" >&2; exit 127`,
			[]string{"ended before it said hello", "exit status 127", "oprov: not found"}},
		{"another protocol", `echo '{"oprov_remote":3,"platform":"linux_amd64"}'; sleep 5`,
			[]string{"remote protocol 3, this oprov speaks 2", "same oprov release"}},
		{"not oprov", `echo 'Welcome to bastion!'; sleep 5`,
			[]string{"not a line of oprov's remote protocol", "Welcome to bastion!"}},
		{"refused", `echo '{"oprov_remote":2,"platform":"linux_amd64"}'; read line; echo '{"error":"no thanks"}'; echo "far: refused" >&2`,
			[]string{"the far side refused: no thanks", "far: refused"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "x" (sh)`, Command: []string{"sh", "-c", c.script},
				Request: req, StartTimeout: 20 * time.Second})
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if err == nil {
				t.Fatal("started")
			}
			for _, w := range append(c.want, `remote "x" (sh)`) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// A far side that never answers is given up at the start timeout.
func TestRemoteStartTimeout(t *testing.T) {
	start := time.Now()
	_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "x" (sh)`, Command: []string{"sh", "-c", "echo waiting >&2; exec sleep 60"},
		Request: func(string) (*RemoteRequest, error) { return &RemoteRequest{}, nil }, StartTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "did not become ready within 500ms") || !strings.Contains(err.Error(), "waiting") {
		t.Errorf("err = %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
}

// The far side's refusal and stderr reach the near terminal quoted: an escape sequence in them
// (a window title, a clear, an OSC 52 clipboard write) is printed as text, never sent whole.
func TestRemoteFarTextIsQuoted(t *testing.T) {
	script := `printf '\033]0;pwned\007\033[2J\033]52;c;ZWNobyBoaQ==\007 far stderr\n' >&2; echo '{"oprov_remote":2,"platform":"linux_amd64"}'; read line; printf '{"error":"no \\u001b]52;c;eA==\\u0007 thanks"}\n'`
	var log strings.Builder
	_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "x" (sh)`, Command: []string{"sh", "-c", script},
		Request: func(string) (*RemoteRequest, error) { return &RemoteRequest{Address: "example.com/acme/x"}, nil }, StartTimeout: 20 * time.Second, Log: &log})
	if err == nil {
		t.Fatal("started")
	}
	for name, text := range map[string]string{"error": err.Error(), "-v log": log.String()} {
		if strings.ContainsAny(text, "\x1b\x07") {
			t.Errorf("the %s holds a raw escape sequence: %q", name, text)
		}
	}
	if !strings.Contains(err.Error(), `\x1b]52;c;eA==\x07 thanks`) || !strings.Contains(err.Error(), `\x1b]0;pwned`) {
		t.Errorf("the error should show the far side's text, quoted: %q", err)
	}
}

// A provider built from source goes only to a far side whose hello says it takes such requests:
// an older far side of the same protocol (no "source" in its hello) would take the package for a
// release, so the near side says so, naming the protocol and the fix, without sending anything.
// A far side's platform beyond a platform's length is refused before the near side builds for
// it. A far side that takes source builds gets the request.
func TestRemoteSourceNeedsFarSupport(t *testing.T) {
	asked := ""
	req := func(platform string) (*RemoteRequest, error) {
		asked = platform
		return &RemoteRequest{Address: "example.com/acme/x", Source: true}, nil
	}
	for _, c := range []struct {
		name, script, want, platform string
	}{
		{"older far side", `echo '{"oprov_remote":2,"platform":"linux_arm64"}'; read line; echo "far: got $line" >&2; sleep 5`,
			"remote protocol 2, an older release", "linux_arm64"},
		{"long platform", `echo '{"oprov_remote":2,"platform":"linux_` + strings.Repeat("a", 100) + `","source":true}'; sleep 5`,
			"beyond the 64 a platform", ""},
		{"far side takes source", `echo '{"oprov_remote":2,"platform":"linux_arm64","source":true}'; read line; case "$line" in *'"source":true'*) echo '{"error":"got a source request"}';; esac`,
			"got a source request", "linux_arm64"},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked = ""
			_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "x" (sh)`, Command: []string{"sh", "-c", c.script},
				Request: req, StartTimeout: 20 * time.Second})
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "far: got {") {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			if asked != c.platform {
				t.Errorf("the request was made for %q, want %q", asked, c.platform)
			}
		})
	}
}
