package plugin

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRemoteRefusalSaidOnce: a far side that refuses the request says so in its reply and on its
// stderr (its own "oprov: ..." line); the near side's error gives the refusal once, and still
// quotes the far side's other stderr lines.
func TestRemoteRefusalSaidOnce(t *testing.T) {
	const refusal = "example.com/acme/x 1.0.0: the lock file records no h1: hash of this package"
	script := `echo '{"oprov_remote":2,"platform":"linux_amd64"}'; read line; echo "far: looking at the cache" >&2; ` +
		`echo '{"error":"` + refusal + `"}'; echo "oprov: ` + refusal + `" >&2`
	_, err := startRemote(context.Background(), RemoteOptions{Name: `remote "x" (sh)`, Command: []string{"sh", "-c", script},
		Request: func(string) (*RemoteRequest, error) { return &RemoteRequest{Address: "example.com/acme/x"}, nil }, StartTimeout: 20 * time.Second})
	if err == nil {
		t.Fatal("started")
	}
	msg := err.Error()
	if n := strings.Count(msg, refusal); n != 1 || !strings.Contains(msg, "the far side refused: "+refusal) || !strings.Contains(msg, "far: looking at the cache") {
		t.Errorf("the refusal is said %d times (want once, with the far side's other lines):\n%s", n, msg)
	}
}
