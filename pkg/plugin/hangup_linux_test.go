package plugin

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// WatchHangup fires when the reading end of a pipe closes, or a socket's peer goes, and not while
// they are there, even with nothing read or written: the far side's standard output as a pipe
// (ssh, sshd, docker exec) or a socket (a socketpair some exec tools give).
func TestWatchHangup(t *testing.T) {
	fired := func(gone <-chan struct{}, within time.Duration) bool {
		select {
		case <-gone:
			return true
		case <-time.After(within):
			return false
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	gone := WatchHangup(w)
	if fired(gone, 200*time.Millisecond) {
		t.Fatal("a pipe whose reader is there was taken for gone")
	}
	r.Close()
	if !fired(gone, 2*time.Second) {
		t.Fatal("a pipe whose reader closed was not seen as gone")
	}

	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, peer := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "peer")
	defer ours.Close()
	gone = WatchHangup(ours)
	if fired(gone, 200*time.Millisecond) {
		t.Fatal("a socket whose peer is there was taken for gone")
	}
	peer.Close()
	if !fired(gone, 2*time.Second) {
		t.Fatal("a socket whose peer closed was not seen as gone")
	}
}
