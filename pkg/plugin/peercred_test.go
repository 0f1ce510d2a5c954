package plugin

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// callProxy makes one call through the proxy socket at sock and says whether it reached the
// provider behind it ("reached") or why not.
func callProxy(sock string) string {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "refused: " + err.Error()
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var resp rawMsg
	if err := conn.Invoke(ctx, "/tfplugin6.Provider/GetProviderSchema", &rawMsg{b: []byte{}}, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		return "refused: " + err.Error()
	}
	if bytes.HasSuffix(resp.b, echoMarker) {
		return "reached"
	}
	return "answered without the provider's echo"
}

// snoop is a hostile provider's side line (OPROV_TEST_SNOOP=FILE): it watches the run's
// directory (its own private directory's parent) for a proxy socket to appear, calls through the
// first it finds, and writes to FILE what came of it.
func snoop(result string) {
	run := filepath.Dir(os.Getenv("PLUGIN_UNIX_SOCKET_DIR"))
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		socks, _ := filepath.Glob(filepath.Join(run, "proxy-*", "*.sock"))
		if len(socks) > 0 {
			os.WriteFile(result, []byte(callProxy(socks[0])), 0o600)
			return
		}
	}
	os.WriteFile(result, []byte("no proxy socket appeared in "+run), 0o600)
}

// A provider oprov started, which watches the run's directory and calls through the proxy
// socket that appears there (another provider's), is refused: only oprov and the command it runs
// reach a proxy. The command (a child process of the group's Run) and oprov itself still do.
func TestProviderCannotDriveAnotherProxy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peer check needs SO_PEERCRED (Linux)")
	}
	result := filepath.Join(t.TempDir(), "snoop")
	hostile := selfAsProvider(t)
	hostile.Env = append(hostile.Env, "OPROV_TEST_SNOOP="+result)
	g, err := StartGroup(context.Background(), []Member{
		{Addr: "example.com/acme/victim", Options: selfAsProvider(t), Wrap: func(m Middleware) Middleware { return m }},
		{Addr: "example.com/acme/snoop", Options: hostile},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	var got []byte
	for deadline := time.Now().Add(25 * time.Second); time.Now().Before(deadline) && len(got) == 0; time.Sleep(50 * time.Millisecond) {
		got, _ = os.ReadFile(result)
	}
	if !strings.HasPrefix(string(got), "refused") {
		t.Errorf("a provider calling another provider's proxy: %q, want it refused", got)
	}
	sock := g.Proxies[0].socket
	if r := callProxy(sock); r != "reached" {
		t.Errorf("oprov itself through the proxy: %s", r)
	}
	out := filepath.Join(t.TempDir(), "command")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "OPROV_TEST_CALL="+sock+"="+out)
	if _, err := g.Run(cmd); err != nil {
		t.Fatal(err)
	}
	if r, _ := os.ReadFile(out); string(r) != "reached" {
		t.Errorf("the command oprov runs, through the proxy: %q", r)
	}
}

// The line of parents decides: self, a child of oprov's that is no provider, and its
// descendants pass; a provider, its descendants, and a process out of oprov's tree do not.
func TestAllowedPeer(t *testing.T) {
	parents := map[int]int{100: 10, 101: 100, 200: 10, 201: 200, 202: 201, 300: 1, 301: 300}
	parent := func(p int) int { return parents[p] }
	started.Store(200, "/p/provider")
	defer started.Delete(200)
	for pid, ok := range map[int]bool{10: true, 100: true, 101: true, 200: false, 201: false, 202: false, 300: false, 301: false, 999: false} {
		if why := allowedPeer(pid, 10, parent); (why == "") != ok {
			t.Errorf("pid %d: %q, want allowed %v", pid, why, ok)
		}
	}
}
