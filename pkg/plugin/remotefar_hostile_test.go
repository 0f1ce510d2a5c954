package plugin

import (
	"bufio"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// A hostile far side opens streams toward the near side, which never accepts one (the near side
// opens every stream of a connection), and sends on each: the near side (a start's launcher, or
// the broker that keeps a command's shared connection for as long as the command runs) keeps
// none of it beyond a stream's window.
func TestRemoteNearSideKeepsNothingOfStreamsTheFarSideOpens(t *testing.T) {
	fromFar, toNear := io.Pipe()
	fromNear, toFar := io.Pipe()
	l := &remoteLink{stdin: toFar}
	if err := l.startSession(bufio.NewReader(fromFar)); err != nil {
		t.Fatal(err)
	}
	defer l.sess.Close()
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	far, err := yamux.Server(&pipeConn{r: fromNear, w: toNear}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	chunk := make([]byte, 256<<10)
	sent := 0
	for i := 0; i < 100; i++ {
		s, err := far.Open()
		if err != nil {
			break
		}
		s.SetWriteDeadline(time.Now().Add(2 * time.Second))
		k, _ := s.Write(chunk)
		sent += k
	}
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("the far side sent %d MiB on streams it opened; the near side's heap grew by %d MiB", sent>>20, kept>>20)
	if kept > 8<<20 {
		t.Errorf("the near side kept %d MiB of what the far side sent on streams it opened", kept>>20)
	}
}
