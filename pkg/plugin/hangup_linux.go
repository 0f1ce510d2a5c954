package plugin

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// WatchHangup gives a channel closed once nothing can read f any more: the reading end of the
// pipe that is f is closed (POLLERR), or the peer of the socket that is f is gone (POLLHUP). A far
// side whose near side stopped reading its output, with its input left open, learns it at once
// instead of at its next write. A watch that cannot be set up gives nil (a channel never closed).
// f stays open while watched: closing it would wait for the watch to end.
func WatchHangup(f *os.File) <-chan struct{} {
	raw, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	gone := make(chan struct{})
	go func() {
		// Control holds a reference on the descriptor, never a lock that writes wait on. The poll
		// asks for no event: only an error, a hangup or an invalid descriptor ends it.
		raw.Control(func(fd uintptr) {
			for {
				fds := []unix.PollFd{{Fd: int32(fd)}}
				n, err := unix.Poll(fds, -1)
				if errors.Is(err, unix.EINTR) {
					continue
				}
				if err == nil && n > 0 && fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
					close(gone)
				}
				return
			}
		})
	}()
	return gone
}
