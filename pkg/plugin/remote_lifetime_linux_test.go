package plugin

import (
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// When its connection ends, in each way one ends (the near side's input closes; its reading end
// goes away so every write fails; both, with a stream open), the far side ends within a bound,
// stops its provider, and spends no CPU after: a far process is one per connection, and one that
// outlived its connection, spinning, would hold a core and a provider with the far side's rights.
func TestRemoteHostEndsWithItsConnection(t *testing.T) {
	for _, how := range []string{"input closed", "output gone", "both, a stream open", "both, after a flood of streams", "silent, nothing closed"} {
		t.Run(how, func(t *testing.T) {
			c := openHost(t, &RemoteHost{Platform: "linux_amd64", KeepAlive: 300 * time.Millisecond,
				Launch: func(context.Context, *RemoteRequest, func(io.Writer) error) (Options, error) {
					return selfAsProvider(t), nil
				}})
			in, fromNear, fromFar, done := c.in, c.fromNear, c.fromFar, c.done
			cfg := yamux.DefaultConfig()
			cfg.LogOutput = io.Discard
			near := &silencing{Conn: &pipeConn{r: in, w: fromNear}, quiet: make(chan struct{})}
			sess, err := yamux.Client(near, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s, err := sess.Open()
			if err != nil {
				t.Fatal(err)
			}
			s.SetReadDeadline(time.Now().Add(3 * time.Second))
			s.Read(make([]byte, 9)) // the gRPC server's first frame: the stream is served
			// Found before a flood, which may end the connection itself (past twice the bound).
			children := childrenOf(t)
			if len(children) == 0 {
				t.Fatal("no provider process found")
			}
			if how == "both, after a flood of streams" {
				// What a hostile near side does before it goes: each stream the far side serves
				// holds a gRPC server connection it must tear down.
				for range 2000 {
					if _, err := sess.Open(); err != nil {
						break
					}
				}
			}
			switch how {
			case "input closed":
				fromNear.Close()
				go io.Copy(io.Discard, fromFar)
			case "output gone":
				fromFar.Close()
			case "silent, nothing closed":
				// The near side's network dropped: nothing more is read or written, nothing ends.
				close(near.quiet)
			default:
				fromNear.Close()
				fromFar.Close()
			}
			before := cpuTime(t)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				buf := make([]byte, 1<<20)
				t.Fatalf("the far side still serves %s after its connection ended (%s):\n%s", 15*time.Second, how, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(time.Second)
			if spent := cpuTime(t) - before; spent > 500*time.Millisecond {
				t.Errorf("the far side spent %s of CPU after its connection ended (%s)", spent, how)
			}
			for _, pid := range children {
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("the provider (pid %d) outlived the connection (%s)", pid, how)
				}
			}
			if how != "silent, nothing closed" { // a silenced session never finishes closing
				sess.Close()
			}
		})
	}
}

// childrenOf lists this process's child processes (from /proc).
func childrenOf(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

// silencing is a near side's connection that, once quiet is closed, neither reads nor writes
// again, and never ends: a near side whose network dropped without a word.
type silencing struct {
	Conn  *pipeConn
	quiet chan struct{}
}

func (c *silencing) Read(b []byte) (int, error) {
	select {
	case <-c.quiet:
		select {}
	default:
	}
	return c.Conn.Read(b)
}

func (c *silencing) Write(b []byte) (int, error) {
	select {
	case <-c.quiet:
		select {}
	default:
	}
	return c.Conn.Write(b)
}

func (c *silencing) Close() error {
	select {
	case <-c.quiet:
		return nil
	default:
	}
	return c.Conn.Close()
}
