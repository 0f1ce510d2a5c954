package plugin

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"github.com/oprov/oprov/pkg/sandbox"
	"google.golang.org/grpc"
)

// TestMain lets the test binary stand in for a provider: with OPROV_TEST_SERVE_PROVIDER set it
// serves the go-plugin handshake and gRPC health service (protocol 6) and nothing else.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == RemoteBrokerCommand {
		if d, err := time.ParseDuration(os.Getenv("OPROV_TEST_BROKER_GRACE")); err == nil {
			brokerGrace = d
		}
		if err := ServeBroker(os.Stdin, os.Stdout); err != nil {
			os.Exit(1) // as oprov __remote-broker (remoteshare_linux_test.go)
		}
		os.Exit(0)
	}
	if v := os.Getenv("OPROV_TEST_BROKER_PROVE"); v != "" {
		os.Exit(prove(v)) // remoteshare_linux_test.go: a process holding a broker's secret
	}
	if v := os.Getenv("OPROV_TEST_SHARE_HOLD"); v != "" {
		os.Exit(shareHold(v)) // remoteshare_linux_test.go: a start its command leaves behind
	}
	if v := os.Getenv("OPROV_TEST_SHARE_LEAVE"); v != "" {
		os.Exit(shareLeave(v)) // remoteshare_linux_test.go: a command that leaves a start behind
	}
	if v := os.Getenv("OPROV_TEST_SHARE_COMMAND"); v != "" {
		os.Exit(shareCommand(v)) // remoteshare_linux_test.go: a command whose starts share
	}
	if path := os.Getenv("OPROV_TEST_BROKER_KNOCK"); path != "" {
		os.Exit(knock(path)) // remoteshare_linux_test.go: another user at a broker's socket
	}
	if len(os.Args) > 1 && os.Args[1] == sandbox.ExecCommand {
		os.Exit(sandbox.Main(os.Args[2:])) // as oprov __sandbox-exec
	}
	if file := os.Getenv("OPROV_TEST_BROKER_IMPOSTOR"); file != "" {
		os.Exit(sandboxedImpostor(file)) // remoteshare_sandbox_linux_test.go: a sandboxed provider plays the broker
	}
	if file := os.Getenv("OPROV_TEST_BROKER_SANDBOXED"); file != "" {
		os.Exit(sandboxedKnock(file)) // remoteshare_sandbox_linux_test.go: a sandboxed provider at the broker
	}
	if path := os.Getenv("OPROV_TEST_DIAL"); path != "" {
		dialAndExit(path)
	}
	if f := os.Getenv("OPROV_TEST_DEATH_PARENT"); f != "" {
		deathParent(f) // deathsig_linux_test.go
	}
	if v := os.Getenv("OPROV_TEST_CALL"); v != "" { // SOCKET=FILE: a command oprov runs, calling a proxy
		sock, out, _ := strings.Cut(v, "=")
		os.WriteFile(out, []byte(callProxy(sock)), 0o600)
		os.Exit(0)
	}
	if f := os.Getenv("OPROV_TEST_SNOOP"); f != "" && os.Getenv("OPROV_TEST_SERVE_PROVIDER") != "" {
		go snoop(f) // peercred_test.go: a provider that watches the run's directory
	}
	if f := os.Getenv("OPROV_TEST_LINGER"); f != "" && os.Getenv("OPROV_TEST_SERVE_PROVIDER") != "" {
		linger(f) // remote_linger_test.go: a provider whose child holds its output
	}
	if f := os.Getenv("OPROV_TEST_ESCAPE"); f != "" && os.Getenv("OPROV_TEST_SERVE_PROVIDER") != "" {
		escape(f) // remote_linger_test.go: a provider whose child leaves its process group
	}
	if f := os.Getenv("OPROV_TEST_ORPHAN"); f != "" && os.Getenv("OPROV_TEST_SERVE_PROVIDER") != "" {
		orphan(f) // remote_linger_test.go: a provider that leaves a short-lived orphan
	}
	if os.Getenv("OPROV_TEST_FAR_HOST") != "" && os.Getenv("OPROV_TEST_SERVE_PROVIDER") == "" {
		os.Exit(farHost()) // remote_linger_test.go: a far side on this process's stdin and stdout
	}
	if os.Getenv("OPROV_TEST_SERVE_PROVIDER") != "" {
		if os.Getenv("OPROV_TEST_OLD_GOPLUGIN") != "" {
			// As a provider built with a go-plugin that predates PLUGIN_UNIX_SOCKET_DIR: its
			// socket goes in the temporary directory.
			os.Unsetenv("PLUGIN_UNIX_SOCKET_DIR")
		}
		goplugin.Serve(&goplugin.ServeConfig{
			HandshakeConfig:  handshake,
			VersionedPlugins: map[int]goplugin.PluginSet{6: {"provider": emptyProvider{}}},
			GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
				// Every method outside go-plugin's own services echoes its request with a marker.
				return grpc.NewServer(append(opts, grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(echo))...)
			},
		})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type emptyProvider struct{ goplugin.Plugin }

func (emptyProvider) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error { return nil }
func (emptyProvider) GRPCClient(context.Context, *goplugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, nil
}

func selfAsProvider(t testing.TB) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Path: exe, Env: []string{"OPROV_TEST_SERVE_PROVIDER=1"}, ForReattach: true}
}

// A group starts every member, hands them all to the command in one TF_REATTACH_PROVIDERS,
// passes the command's exit code back, and leaves no provider process behind.
func TestGroupRunsCommandAndStopsAll(t *testing.T) {
	g, err := StartGroup(context.Background(), []Member{
		{Addr: "example.com/acme/one", Options: selfAsProvider(t)},
		{Addr: "example.com/acme/two", Options: selfAsProvider(t)},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "reattach.json")
	code, err := g.Run(exec.Command("sh", "-c", `printf '%s' "$TF_REATTACH_PROVIDERS" > "$0"; exit 3`, out))
	if err != nil || code != 3 {
		t.Fatalf("Run gave %d, %v; want exit code 3", code, err)
	}
	var seen map[string]Reattach
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &seen); err != nil {
		t.Fatalf("the command did not get valid TF_REATTACH_PROVIDERS: %v: %q", err, data)
	}
	var pids []int
	for _, addr := range []string{"example.com/acme/one", "example.com/acme/two"} {
		r, ok := seen[addr]
		if !ok || r.ProtocolVersion != 6 || !r.Test || r.Pid == 0 || r.Addr.Network != "unix" {
			t.Errorf("reattach entry for %s: %+v", addr, r)
		}
		pids = append(pids, r.Pid)
	}
	g.Stop()
	for _, pid := range pids {
		if processAlive(pid) {
			t.Errorf("provider pid %d still running after Stop", pid)
		}
	}
}

// A member that fails to start fails the group with its address named, and the members that
// did start are stopped.
func TestGroupStopsStartedMembersWhenOneFails(t *testing.T) {
	good := selfAsProvider(t)
	bad := Options{Path: filepath.Join(t.TempDir(), "terraform-provider-missing")}
	before := children(t)
	_, err := StartGroup(context.Background(), []Member{{Addr: "example.com/acme/good", Options: good}, {Addr: "example.com/acme/bad", Options: bad}})
	if err == nil || !strings.Contains(err.Error(), "example.com/acme/bad") {
		t.Fatalf("want an error naming example.com/acme/bad, got %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(children(t)) > len(before) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := len(children(t)); n > len(before) {
		t.Errorf("%d provider processes left running after a failed start", n-len(before))
	}
}

func processAlive(pid int) bool {
	// A stopped child may linger as a zombie until reaped: that counts as gone.
	data, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data))
	return len(f) > 2 && f[2] != "Z"
}

// children lists this process's live child processes (Linux).
func children(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", itoa(os.Getpid()), "task", itoa(os.Getpid()), "children"))
	if err != nil {
		t.Skip("needs /proc")
	}
	var live []string
	for _, pid := range strings.Fields(string(data)) {
		if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && len(strings.Fields(string(st))) > 2 && strings.Fields(string(st))[2] != "Z" {
			live = append(live, pid)
		}
	}
	return live
}

func itoa(n int) string { return strconv.Itoa(n) }

// Entries the user already set in TF_REATTACH_PROVIDERS reach the command as they were, beside
// the group's; an address both name, or a value that is not JSON, is refused before the command
// runs.
func TestGroupRunKeepsUserReattach(t *testing.T) {
	g, err := StartGroup(context.Background(), []Member{{Addr: "example.com/acme/one", Options: selfAsProvider(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	const dev = `{"Protocol":"grpc","ProtocolVersion":6,"Pid":42,"Test":true,"Addr":{"Network":"unix","String":"/tmp/dev.sock"}}`
	out := filepath.Join(t.TempDir(), "reattach.json")
	cmd := exec.Command("sh", "-c", `printf '%s' "$TF_REATTACH_PROVIDERS" > "$0"`, out)
	cmd.Env = append(os.Environ(), `TF_REATTACH_PROVIDERS={"acme/dev":`+dev+`}`)
	if code, err := g.Run(cmd); err != nil || code != 0 {
		t.Fatalf("Run gave %d, %v", code, err)
	}
	var seen map[string]json.RawMessage
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &seen); err != nil {
		t.Fatalf("invalid TF_REATTACH_PROVIDERS: %v: %q", err, data)
	}
	if string(seen["acme/dev"]) != dev {
		t.Errorf("the user's entry became %s, want it kept as %s", seen["acme/dev"], dev)
	}
	if _, ok := seen["example.com/acme/one"]; !ok || len(seen) != 2 {
		t.Errorf("want the user's entry and the group's, got %s", data)
	}
	for _, tc := range []struct{ user, want string }{
		{`{"EXAMPLE.com/acme/one":` + dev + `}`, "TF_REATTACH_PROVIDERS already names EXAMPLE.com/acme/one, which oprov run launches too"},
		{`not json`, "TF_REATTACH_PROVIDERS is set but is not a JSON object"},
	} {
		cmd := exec.Command("sh", "-c", `touch "$0"`, filepath.Join(t.TempDir(), "ran"))
		cmd.Env = []string{"TF_REATTACH_PROVIDERS=" + tc.user}
		if _, err := g.Run(cmd); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("user value %s: err %v, want %q", tc.user, err, tc.want)
		}
		if _, err := os.Stat(cmd.Args[2]); err == nil {
			t.Errorf("user value %s: the command ran anyway", tc.user)
		}
	}
}
