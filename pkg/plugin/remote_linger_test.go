//go:build linux

package plugin

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// linger, in a provider (the test binary serving as one), starts a child in the provider's
// process group that holds the provider's stdout and stderr and outlives it, as a helper a
// provider starts (a credential process, a daemon) may; it writes the child's pid to file.
func linger(file string) {
	cmd := exec.Command("sleep", "600")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	os.WriteFile(file, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
}

// A provider whose child holds its output pipes past its own exit (go-plugin waits for those
// pipes to close before its Kill returns) must not hold the far side, or the child, past the
// bound once the connection ends: the provider's process group is killed at the bound, whatever
// go-plugin still waits for.
func TestRemoteHostEndsDespiteALingeringChild(t *testing.T) {
	pidFile := t.TempDir() + "/child.pid"
	c := openHost(t, &RemoteHost{Platform: "linux_amd64",
		Launch: func(context.Context, *RemoteRequest, func(io.Writer) error) (Options, error) {
			o := selfAsProvider(t)
			o.Env = append(o.Env, "OPROV_TEST_LINGER="+pidFile)
			return o, nil
		}})
	in, fromNear, fromFar, done := c.in, c.fromNear, c.fromFar, c.done
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	sess, err := yamux.Client(&pipeConn{r: in, w: fromNear}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(string(b))
	defer syscall.Kill(child, syscall.SIGKILL)

	fromNear.Close() // the connection ends: the near side's input closes
	go io.Copy(io.Discard, fromFar)
	ended := time.Now()
	select {
	case <-done:
	case <-time.After(3 * remoteEndBound):
		t.Fatalf("the far side still serves %s after its connection ended, held by its provider's child", 3*remoteEndBound)
	}
	if took := time.Since(ended); took > remoteEndBound {
		t.Errorf("the far side ended %s after its connection; the bound is %s", took.Round(time.Millisecond), remoteEndBound)
	}
	deadline := time.Now().Add(time.Second)
	for syscall.Kill(child, 0) == nil && !zombie(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the provider's child (pid %d) outlived the far side", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie says pid has ended and awaits its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] == "Z"
}

// escape, in a provider, starts a child that leaves the provider's process group and session
// (setsid), so that killing the group misses it, and writes its pid to file.
func escape(file string) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	os.WriteFile(file, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
}

// farHost is the far side as `oprov provider host --stdio` runs it (AdoptOrphans first,
// KillOrphans last, its providers dying with it), serving the test binary as its provider, with
// OPROV_TEST_FAR_ENV added to the provider's environment.
func farHost() int {
	if err := AdoptOrphans(); err != nil {
		return 3
	}
	defer KillOrphans(500 * time.Millisecond)
	exe, err := os.Executable()
	if err != nil {
		return 3
	}
	if n, err := strconv.Atoi(os.Getenv("OPROV_TEST_SESSION_PROVIDERS")); err == nil {
		defaultSessionProviders = n
	}
	h := &RemoteHost{In: os.Stdin, Out: os.Stdout, Platform: "linux_amd64",
		Launch: func(context.Context, *RemoteRequest, func(io.Writer) error) (Options, error) {
			return Options{Path: exe, Env: []string{"OPROV_TEST_SERVE_PROVIDER=1", os.Getenv("OPROV_TEST_FAR_ENV")}, ForReattach: true, DieWithParent: true}, nil
		}}
	if n, err := strconv.Atoi(os.Getenv("OPROV_TEST_HOST_STREAMS")); err == nil {
		h.Streams = n // a host block's streams
	}
	if err := h.Serve(context.Background()); err != nil {
		return 1
	}
	return 0
}

// farProcess starts this test binary as a far side (farHost) with farEnv in its provider's
// environment, and opens a connection of one provider to it: it gives the far process, its input
// and its output, past the ready line.
func farProcess(t *testing.T, farEnv string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	far := exec.Command(exe)
	far.Env = append(os.Environ(), "OPROV_TEST_FAR_HOST=1", "OPROV_TEST_FAR_ENV="+farEnv)
	toFar, err := far.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	fromFar, err := far.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := far.Start(); err != nil {
		t.Fatal(err)
	}
	in := bufio.NewReader(fromFar)
	if _, err := in.ReadBytes('\n'); err != nil {
		t.Fatal(err)
	}
	io.WriteString(toFar, `{"protocol":`+strconv.Itoa(RemoteProtocol)+`}`+"\n")
	if line, err := in.ReadBytes('\n'); err != nil || !strings.Contains(string(line), `"ready":true`) {
		t.Fatalf("%s %v", line, err)
	}
	return far, toFar, in
}

// A provider's child that left the provider's process group (setsid) is not reached by killing
// the group; the far process adopts such orphans and kills them when its connection ends, so
// nothing a provider started outlives the connection.
func TestRemoteHostKillsWhatLeftTheGroup(t *testing.T) {
	pidFile := t.TempDir() + "/escaped.pid"
	far, toFar, in := farProcess(t, "OPROV_TEST_ESCAPE="+pidFile)
	defer far.Process.Kill()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	escaped, _ := strconv.Atoi(string(b))
	defer syscall.Kill(escaped, syscall.SIGKILL)

	toFar.Close() // the connection ends
	go io.Copy(io.Discard, in)
	ended := time.Now()
	exited := make(chan error, 1)
	go func() { exited <- far.Wait() }()
	select {
	case <-exited:
	case <-time.After(3 * remoteEndBound):
		t.Fatal("the far process did not end after its connection ended")
	}
	if took := time.Since(ended); took > remoteEndBound {
		t.Errorf("the far process ended %s after its connection; the bound is %s", took.Round(time.Millisecond), remoteEndBound)
	}
	deadline := time.Now().Add(time.Second)
	for syscall.Kill(escaped, 0) == nil && !zombie(escaped) {
		if time.Now().After(deadline) {
			t.Fatalf("the provider's child that left its group (pid %d) outlived the far process", escaped)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// orphan, in a provider, leaves a process whose parent ends at once and which itself ends soon
// after: an orphan the far side adopts, and which dies there. Its pid goes to file.
func orphan(file string) {
	if err := exec.Command("sh", "-c", `sleep 0.3 & echo $! > "$0"`, file).Run(); err != nil {
		panic(err)
	}
}

// An orphan the far side adopted that ends while the connection lasts is reaped then, not left a
// zombie (holding a process ID) until the far side ends.
func TestRemoteHostReapsOrphans(t *testing.T) {
	pidFile := t.TempDir() + "/orphan.pid"
	far, _, in := farProcess(t, "OPROV_TEST_ORPHAN="+pidFile)
	defer func() { far.Process.Kill(); far.Wait() }()
	go io.Copy(io.Discard, in)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		if err != nil {
			break // reaped
		}
		if time.Now().After(deadline) {
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("the orphan (pid %d) is still there 5s on, while the connection lasts: %s", pid, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
