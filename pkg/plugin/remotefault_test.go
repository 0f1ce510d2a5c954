package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A far side that never says hello is given up at the hello's bound, well before the start's,
// with an error that names the bound and where it is set; -v said where it was connecting first.
func TestRemoteHelloIsBounded(t *testing.T) {
	var log strings.Builder
	start := time.Now()
	_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "x" (sh)`, Command: []string{"sh", "-c", "echo 'Password: ' >&2; exec sleep 60"},
		Request:      func(string) (*RemoteRequest, error) { return &RemoteRequest{}, nil },
		StartTimeout: time.Minute, HelloTimeout: 300 * time.Millisecond, HelloSetting: "hello_timeout in the remote block at oprov.hcl:3", Log: &log})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s", took)
	}
	if err == nil {
		t.Fatal("started")
	}
	for _, w := range []string{`remote "x" (sh)`, "said no hello within 300ms", "hello_timeout in the remote block at oprov.hcl:3", "Password:"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if !strings.Contains(log.String(), `oprov: remote "x" (sh): connecting through sh -c`) {
		t.Errorf("-v said no connecting line: %q", log.String())
	}
}

// ssh's own failure (exit 255: refused, unknown host key, no login) is reported as ssh's, with
// what ssh said, not as a far side without oprov.
func TestRemoteSSHFailureIsSSHs(t *testing.T) {
	dir := t.TempDir()
	ssh := filepath.Join(dir, "ssh")
	script := "#!/bin/sh\necho 'ssh: connect to host far.example port 2222: Connection refused' >&2\nexit 255\n"
	if err := os.WriteFile(ssh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "*" (ssh)`,
		Command: []string{ssh, "-p", "2222", "-oBatchMode=yes", "-T", "deploy@far.example", "/usr/local/bin/oprov", "provider", "host", "--stdio"},
		Request: func(string) (*RemoteRequest, error) { return &RemoteRequest{}, nil }, Log: &log})
	if err == nil {
		t.Fatal("started")
	}
	for _, w := range []string{"ssh failed (exit 255)", "to deploy@far.example", "ssh's stderr ended with", "Connection refused"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "is oprov installed") {
		t.Errorf("ssh's failure is blamed on the far side: %v", err)
	}
	if !strings.Contains(log.String(), "connecting to deploy@far.example through ssh") {
		t.Errorf("-v said no connecting line: %q", log.String())
	}
	// The same exit from a command that is not ssh is the far side's own.
	_, err = startRemote(context.Background(), RemoteOptions{Name: `remote "*" (sh)`, Command: []string{"sh", "-c", "exit 255"},
		Request: func(string) (*RemoteRequest, error) { return &RemoteRequest{}, nil }})
	if err == nil || strings.Contains(err.Error(), "ssh failed") {
		t.Errorf("sh's exit 255 = %v", err)
	}
}

func TestSSHDestination(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-T", "deploy@far", "oprov"}, "deploy@far"},
		{[]string{"-p", "2222", "-i", "key", "far"}, "far"},
		{[]string{"-p2222", "-oUserKnownHostsFile=k", "far", "-p", "1"}, "far"},
		{[]string{"-o", "BatchMode=yes", "-tt", "--", "far"}, "far"},
		{[]string{"-vTp", "22", "far"}, "far"},
		{[]string{"-p"}, ""},
		{nil, ""},
	} {
		if got := sshDestination(c.args); got != c.want {
			t.Errorf("sshDestination(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
