package plugin

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialAndExit is the test binary run as another user: exit 0 when it can connect to the unix
// socket at path, 3 when it cannot.
func dialAndExit(path string) {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(3)
	}
	c.Close()
	os.Exit(0)
}

// listeningSockets gives the paths of the unix sockets a process has open (Linux: its fds'
// inodes, looked up in /proc/net/unix).
func listeningSockets(t *testing.T, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(filepath.Join("/proc", itoa(pid), "fd"))
	if err != nil {
		t.Skipf("needs /proc: %v", err)
	}
	for _, fd := range fds {
		l, _ := os.Readlink(filepath.Join("/proc", itoa(pid), "fd", fd.Name()))
		if in, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		t.Skipf("needs /proc/net/unix: %v", err)
	}
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		// Num RefCount Protocol Flags Type St Inode Path
		fs := strings.Fields(sc.Text())
		if len(fs) >= 8 && inodes[fs[6]] && strings.HasPrefix(fs[7], "/") {
			out = append(out, fs[7])
		}
	}
	return out
}

// worldExecutableCopy copies the test binary where another user can run it.
func worldExecutableCopy(t *testing.T) string {
	t.Helper()
	exe, _ := os.Executable()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent is private too
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, "dial")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(out, in)
	out.Close()
	return dst
}

// Every socket a provider listens on, and every proxy socket, is inside the run's private
// directory (mode 0700): another user cannot connect to any of them; Stop removes it all. One
// member stands for providers that ignore PLUGIN_UNIX_SOCKET_DIR.
func TestSocketsArePrivate(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("dropping to another user needs root")
	}
	// oprov's own TMPDIR is set, as it often is: the providers' must still be the private one.
	t.Setenv("TMPDIR", t.TempDir())
	old := selfAsProvider(t)
	old.Env = append(old.Env, "OPROV_TEST_OLD_GOPLUGIN=1")
	nop := func(*Provider) (Middleware, error) { return nopMiddleware{}, nil }
	g, err := StartGroup(context.Background(), []Member{
		{Addr: "example.com/acme/new", Options: selfAsProvider(t), Middleware: nop},
		{Addr: "example.com/acme/old", Options: old},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	st, err := os.Stat(g.Dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("run directory %s: %v %v, want mode 0700", g.Dir, st.Mode(), err)
	}
	var socks []string
	for i, p := range g.Providers {
		own := listeningSockets(t, p.Pid())
		if len(own) == 0 {
			t.Fatalf("member %d listens on no unix socket", i)
		}
		socks = append(socks, own...)
		if x := g.Proxies[i]; x != nil {
			socks = append(socks, x.ReattachConfig().Addr.String)
		}
	}
	dial := worldExecutableCopy(t)
	for _, s := range socks {
		if !strings.HasPrefix(s, g.Dir+"/") {
			t.Errorf("socket %s is outside the run's private directory %s", s, g.Dir)
		}
		// As root, the same binary connects: the socket is live.
		asRoot := exec.Command(dial)
		asRoot.Env = []string{"OPROV_TEST_DIAL=" + s}
		if err := asRoot.Run(); err != nil {
			t.Errorf("root cannot connect to %s: %v", s, err)
		}
		cmd := exec.Command(dial)
		cmd.Env = []string{"OPROV_TEST_DIAL=" + s}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("user nobody connected to %s, or could not be run: %v %s", s, err, out)
		}
	}
	g.Stop()
	if _, err := os.Stat(g.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the run's private directory %s is still there after Stop", g.Dir)
	}
}
