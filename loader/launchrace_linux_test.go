package loader_test

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/pkg/plugin"
)

// inotifyOpens watches a directory for opens (of itself and of what it holds), as an attacker
// who can write the cache would, and counts them.
type inotifyOpens struct{ f *os.File }

func watchOpens(t *testing.T, dir string) *inotifyOpens {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_OPEN); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	w := &inotifyOpens{f: os.NewFile(uintptr(fd), "inotify")}
	t.Cleanup(func() { w.f.Close() })
	return w
}

// next waits for events and gives how many opens they report.
func (w *inotifyOpens) next() (int, error) {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	n, err := w.f.Read(buf)
	if err != nil {
		return 0, err
	}
	opens := 0
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		mask := binary.NativeEndian.Uint32(buf[off+4:])          // InotifyEvent.Mask
		nameLen := int(binary.NativeEndian.Uint32(buf[off+12:])) // InotifyEvent.Len
		if mask&unix.IN_OPEN != 0 {
			opens++
		}
		off += unix.SizeofInotifyEvent + nameLen
	}
	return opens, nil
}

// warmLaunch sets up a project whose provider has been unpacked, hashed and fingerprinted: the
// state every later launch checks from. It gives a function giving the launchables, the
// executable and a file staged beside the package (rename needs one file system) whose bytes
// would say that they ran.
func warmLaunch(t *testing.T) (launchables func() ([]loader.Launchable, error), exe, staged, marker string) {
	t.Helper()
	t.Setenv("OPROV_STATE_DIR", t.TempDir()) // the fingerprint key (read once per process)
	w := newWorld(t)
	dir := w.project(t, map[string]string{"hello": "~> 1.0"}, "")
	launchables = func() ([]loader.Launchable, error) { return open(t, dir).Launchables(context.Background(), w.opts()) }
	var ls []loader.Launchable
	for i := 0; i < 3; i++ {
		var err error
		if ls, err = launchables(); err != nil {
			t.Fatal(err)
		}
	}
	exe = ls[0].Executable
	marker = filepath.Join(t.TempDir(), "swapped-bytes-ran")
	staged = filepath.Join(filepath.Dir(filepath.Dir(exe)), "staged")
	if err := os.WriteFile(staged, []byte("#!/bin/sh\necho swapped > '"+marker+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return launchables, exe, staged, marker
}

// launchSwapped starts the first launchable as oprov run does, and fails the test if the bytes
// swapped in ran; it gives the start's error.
func launchSwapped(t *testing.T, ls []loader.Launchable, marker string) error {
	t.Helper()
	ctx := context.Background()
	base := plugin.Options{ForReattach: true, StartTimeout: 5 * time.Second}
	p, err := plugin.Start(ctx, loader.Members(ls, base)[0].Options)
	if err == nil {
		p.Stop(ctx)
	}
	if data, rerr := os.ReadFile(marker); rerr == nil {
		t.Fatalf("the bytes swapped in after the launch check ran (%s); start: %v", strings.TrimSpace(string(data)), err)
	}
	return err
}

// Whoever can write the cache's mirror/ directory swaps the provider's executable after the
// launch check and before the exec: the launch refuses, and the swapped bytes never run.
func TestLaunchRefusesAnExecutableSwappedAfterItsCheck(t *testing.T) {
	launchables, exe, staged, marker := warmLaunch(t)
	ls, err := launchables() // the check
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staged, exe); err != nil {
		t.Fatal(err)
	}
	if err := launchSwapped(t, ls, marker); err == nil || !strings.Contains(err.Error(), "after its check") {
		t.Errorf("the launch of a swapped executable was not refused as such: %v", err)
	}
}

// A racer swaps the executable once inotify has reported the launch check looking at the
// package's directory, and then nothing more for a moment. Whichever it beats, the check or the exec, the launch runs the checked
// bytes or refuses; never the swapped ones.
func TestLaunchRacedWithInotifyRunsTheCheckedBytesOrNothing(t *testing.T) {
	launchables, exe, staged, marker := warmLaunch(t)
	watch := watchOpens(t, filepath.Dir(exe))
	swapped := make(chan error, 1)
	go func() {
		// The check's look at the directory is a burst of opens: swap once it has gone quiet.
		if _, err := watch.next(); err != nil {
			swapped <- err
			return
		}
		for {
			watch.f.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if _, err := watch.next(); errors.Is(err, os.ErrDeadlineExceeded) {
				break
			} else if err != nil {
				swapped <- err
				return
			}
		}
		swapped <- os.Rename(staged, exe)
	}()
	ls, checkErr := launchables()
	select {
	case err := <-swapped:
		if err != nil {
			t.Fatal("the racer:", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the racer never swapped")
	}
	if checkErr != nil {
		if !strings.Contains(checkErr.Error(), "changed") {
			t.Errorf("the check caught the swap but does not say so: %v", checkErr)
		}
		t.Log("the check itself caught the swap:", checkErr)
		return
	}
	if err := launchSwapped(t, ls, marker); err == nil {
		t.Error("the launch of a swapped executable was not refused")
	}
}
