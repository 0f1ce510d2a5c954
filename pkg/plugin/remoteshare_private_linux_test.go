package plugin

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The runtime directory is reached only through directories no one else can change: below a
// directory another user owns ($XDG_RUNTIME_DIR kept by sudo -E: root's secrets below the user's
// /run/user/UID), or one others may write that is not sticky, another user can rename the
// private directory away after its check and put a link to a directory of theirs in its place.
func TestRemoteShareRuntimeDirAboveIsPrivate(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777) // writable by all, not sticky
	t.Setenv("XDG_RUNTIME_DIR", shared)
	if dir, err := runtimeDir(); err == nil || !strings.Contains(err.Error(), shared) {
		t.Errorf("a runtime directory below %s, which anyone may write and is not sticky, was taken: %s %v", shared, dir, err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky) // sticky, as /tmp: others cannot rename what is not theirs
	if _, err := runtimeDir(); err != nil {
		t.Errorf("below a sticky directory: %v", err)
	}
	// A link on the way is judged where it leads.
	link := filepath.Join(t.TempDir(), "link")
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	os.Symlink(open, link)
	t.Setenv("XDG_RUNTIME_DIR", link)
	if _, err := runtimeDir(); err == nil {
		t.Error("a runtime directory through a link to a directory anyone may write was taken")
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest needs root, to give a directory to another user")
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", theirs)
	if dir, err := runtimeDir(); err == nil || !strings.Contains(err.Error(), theirs) {
		t.Errorf("a runtime directory below another user's %s was taken: %s %v", theirs, dir, err)
	}
}

// brokers lists the pids of this test binary's brokers that are running with runtime as their
// runtime directory (other tests' brokers live on until the test binary, their command, ends).
func brokers(t *testing.T, runtime string) []string {
	t.Helper()
	exe, _ := os.Executable()
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if i := strings.LastIndexByte(string(stat), ')'); i < 0 || strings.HasPrefix(string(stat[i+1:]), " Z") {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if !slices.Contains(strings.Split(string(env), "\x00"), "XDG_RUNTIME_DIR="+runtime) {
			continue
		}
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[0] == exe && args[1] == RemoteBrokerCommand {
			out = append(out, e.Name())
		}
	}
	return out
}

// A far side that never says hello: the start fails at the hello's bound, and the broker ends
// at once with its connection's command, leaving no secret behind (the next start tries anew).
func TestRemoteShareSilentFarSideLeavesNothing(t *testing.T) {
	f := newShareFixture(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	f.opts.Command = []string{"sh", "-c", `echo $$ > "$0"; exec sleep 600`, pidFile}
	f.opts.HelloTimeout = time.Second
	begun := time.Now()
	if p, err := startAny(context.Background(), f.opts); err == nil {
		p.Stop(context.Background())
		t.Fatal("a start on a far side that never says hello succeeded")
	} else {
		t.Logf("%v", err)
	}
	if took := time.Since(begun); took > 8*time.Second {
		t.Errorf("the start failed after %s, past the hello's bound of 1s", took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		secrets := f.secrets()
		pid, _ := os.ReadFile(pidFile)
		stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/stat")
		cmdAlive := err == nil && !strings.Contains(string(stat), ") Z")
		b := brokers(t, f.runtime)
		if len(secrets) == 0 && !cmdAlive && len(b) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after the start failed: secrets %v, the connection's command running: %v, brokers %v", secrets, cmdAlive, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Starts of one command that begin at once (tofu starts a provider's instances, one per
// configuration, in parallel) share one connection: a start that finds the secret of a broker
// still starting waits for it, instead of taking it for one that is gone, removing it, and making
// a connection of its own.
func TestRemoteShareConcurrentStartsShareOne(t *testing.T) {
	f := newShareFixture(t)
	var wg sync.WaitGroup
	ps := make([]*Provider, 4)
	for i := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := startAny(context.Background(), f.opts)
			if err != nil {
				t.Error(err)
			}
			ps[i] = p
		}()
	}
	wg.Wait()
	for _, p := range ps {
		if p != nil {
			call(t, p)
			p.Stop(context.Background())
		}
	}
	if got := f.lines(); got != "start" {
		t.Errorf("4 starts at once ran the connection's command as %q, want one start", got)
	}
}

// A far operator's bound on streams at once (a host block's streams, default 8 for a connection
// of one provider's) also bounds a shared connection: a launch stream past it is closed before
// its hello. The start then connects on its own, as past the bound on providers, instead of
// failing.
func TestRemoteShareLaunchPastTheStreamBoundConnectsOnItsOwn(t *testing.T) {
	f := newShareFixture(t)
	t.Setenv("OPROV_TEST_HOST_STREAMS", "2")
	var log strings.Builder
	f.opts.Log = &log
	p1, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Stop(context.Background())
	call(t, p1) // its launch stream and its calls stream: the far side's bound
	p2, err := startAny(context.Background(), f.opts)
	if err != nil {
		t.Fatalf("a start past the far side's bound on streams: %v\n%s", err, log.String())
	}
	defer p2.Stop(context.Background())
	call(t, p2)
	if got := f.lines(); got != "start start" {
		t.Errorf("connections: %q, want the shared one and one of the second start's own", got)
	}
	t.Logf("%s", log.String())
}
