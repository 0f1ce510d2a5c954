package scratch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// TestMain doubles as the child process of the kill tests. With SCRATCH_CHILD=PARENT it claims
// an owner directory in PARENT and writes a 1 MiB file in it; with SCRATCH_CHILD_FILE=DEST it
// writes 1 MiB of DEST through WriteFileAtomic. Either way it prints the path of what it is
// writing and waits, mid-write, to be killed.
func TestMain(m *testing.M) {
	partial := bytes.Repeat([]byte{'x'}, 1<<20)
	if parent := os.Getenv("SCRATCH_CHILD"); parent != "" {
		d, err := Claim(parent)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.WriteFile(filepath.Join(d.Path, "partial"), partial, 0o644)
		fmt.Println(filepath.Join(d.Path, "partial"))
		select {}
	}
	if dest := os.Getenv("SCRATCH_CHILD_FILE"); dest != "" {
		WriteFileAtomic(dest, func(w io.Writer) error {
			w.Write(partial)
			fmt.Println(w.(*os.File).Name())
			select {}
		})
	}
	os.Exit(m.Run())
}

// killedWriter starts a child that writes a partial file (see TestMain) with env set, then kills
// it with SIGKILL: what a crashed run leaves behind. It returns the partial file.
func killedWriter(t *testing.T, env string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	path := strings.TrimSpace(line)
	if st, err := os.Stat(path); err != nil || st.Size() != 1<<20 {
		t.Fatalf("the child left no partial file (%q): %v", line, err)
	}
	return path
}

// killedOwner leaves in parent the owner directory of a killed process, holding a 1 MiB file.
func killedOwner(t *testing.T, parent string) string {
	t.Helper()
	return filepath.Dir(killedWriter(t, "SCRATCH_CHILD="+parent))
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestSweepRemovesWhatAKilledOwnerLeft: a SIGKILLed owner's directory and lock file go at the
// next sweep, with no waiting; the sweep says what it removed.
func TestSweepRemovesWhatAKilledOwnerLeft(t *testing.T) {
	parent := t.TempDir()
	dead := killedOwner(t, parent)
	if got := List(parent); len(got) != 1 || got[0].Live || got[0].Size != 1<<20 || got[0].Path != dead || got[0].PID == 0 {
		t.Fatalf("List before the sweep: %+v", got)
	}
	s := Sweep(parent)
	if s.Owners != 1 || s.Bytes != 1<<20 {
		t.Errorf("Sweep removed %+v, want 1 owner of 1 MiB", s)
	}
	if left := names(t, parent); len(left) != 0 {
		t.Errorf("left after the sweep: %v", left)
	}
}

// TestSweepSparesALiveOwner: an owner this process holds is live to a sweep (flock locks belong
// to an open file, so even this process's own sweep cannot take them), and keeps its files.
func TestSweepSparesALiveOwner(t *testing.T) {
	parent := t.TempDir()
	live, err := Claim(parent)
	if err != nil {
		t.Fatal(err)
	}
	dead := killedOwner(t, parent)
	os.WriteFile(filepath.Join(live.Path, "download"), []byte("in progress"), 0o644)
	if s := Sweep(parent); s.Owners != 1 {
		t.Errorf("Sweep removed %d owners, want 1 (the dead one)", s.Owners)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead owner's directory is still there: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(live.Path, "download")); err != nil || string(data) != "in progress" {
		t.Fatalf("the live owner's file was touched: %q, %v", data, err)
	}
	if got := List(parent); len(got) != 1 || !got[0].Live || got[0].PID != os.Getpid() {
		t.Errorf("List: %+v, want the one live owner", got)
	}
	if err := live.Release(); err != nil {
		t.Fatal(err)
	}
	if left := names(t, parent); len(left) != 0 {
		t.Errorf("left after Release: %v", left)
	}
}

// TestOrphanDirectoryIsKept: a directory of an owned name without its lock file did not come
// from a killed run, and oprov cannot tell it made it: it stays.
func TestOrphanDirectoryIsKept(t *testing.T) {
	parent := t.TempDir()
	orphan := filepath.Join(parent, Prefix+"1-0123456789abcdef")
	os.MkdirAll(filepath.Join(orphan, "x"), 0o755)
	os.WriteFile(filepath.Join(orphan, "x", "f"), []byte("abc"), 0o644)
	if s := Sweep(parent); s.Owners != 0 {
		t.Errorf("Sweep: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(orphan, "x", "f")); err != nil {
		t.Errorf("the directory was swept: %v", err)
	}
}

// TestSweepSparesUsersLookalikes: names that only start with the prefix are the user's, files
// and directories alike: never swept, never listed; a killed owner beside them still goes.
func TestSweepSparesUsersLookalikes(t *testing.T) {
	parent := t.TempDir()
	dead := killedOwner(t, parent)
	mine := []string{Prefix + "notes", Prefix + "mine", Prefix + "notes.lock", Prefix + "x-1.txt"}
	os.WriteFile(filepath.Join(parent, mine[0]), []byte("my notes"), 0o644)
	os.MkdirAll(filepath.Join(parent, mine[1], "sub"), 0o755)
	os.WriteFile(filepath.Join(parent, mine[2]), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(parent, mine[3]), []byte("y"), 0o644)
	if s := Sweep(parent); s.Owners != 1 {
		t.Errorf("Sweep removed %d owners, want 1 (the killed one)", s.Owners)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed owner's directory is still there")
	}
	for _, n := range mine {
		if _, err := os.Stat(filepath.Join(parent, n)); err != nil {
			t.Errorf("the user's %s was swept: %v", n, err)
		}
	}
	if got := List(parent); len(got) != 0 {
		t.Errorf("List counts the user's files as owners: %+v", got)
	}
}

// TestWriteFileAtomicCleansBesideItsTarget: the next write beside a target removes what killed
// writers left there (an owner directory, a temporary file that was its own lock), and leaves
// only the target.
func TestWriteFileAtomicCleansBesideItsTarget(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "out.zip")
	killedOwner(t, parent)
	partial := killedWriter(t, "SCRATCH_CHILD_FILE="+dest)
	if !IsOwned(filepath.Base(partial)) || filepath.Dir(partial) != parent {
		t.Fatalf("the temporary file %s is not an owned name beside its target", partial)
	}
	if err := WriteFileAtomic(dest, func(w io.Writer) error { _, err := io.WriteString(w, "whole"); return err }); err != nil {
		t.Fatal(err)
	}
	if left := names(t, parent); len(left) != 1 || left[0] != "out.zip" {
		t.Errorf("left beside the target: %v", left)
	}
	// A failed write leaves neither the target nor a temporary file.
	err := WriteFileAtomic(filepath.Join(parent, "bad.zip"), func(w io.Writer) error { return io.ErrUnexpectedEOF })
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("want the writer's error, got %v", err)
	}
	if left := names(t, parent); len(left) != 1 {
		t.Errorf("left after a failed write: %v", left)
	}
}

// TestSweepSparesALiveWrite: a sweep beside a target leaves a write in progress alone.
func TestSweepSparesALiveWrite(t *testing.T) {
	parent := t.TempDir()
	dest := filepath.Join(parent, "out.zip")
	started, release := make(chan string), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- WriteFileAtomic(dest, func(w io.Writer) error {
			w.Write([]byte("half"))
			started <- w.(*os.File).Name()
			<-release
			_, err := w.Write([]byte(" and the rest"))
			return err
		})
	}()
	partial := <-started
	if s := Sweep(parent); s.Owners != 0 {
		t.Errorf("Sweep removed %+v", s)
	}
	if got := List(parent); len(got) != 1 || !got[0].Live || got[0].Path != partial || got[0].Size != 4 {
		t.Errorf("List: %+v", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(dest); string(data) != "half and the rest" {
		t.Errorf("the target holds %q", data)
	}
}

// TestClaimsRaceSweeps: owners claiming, writing and releasing while other goroutines sweep
// without pause never lose a file, and nothing is left at the end.
func TestClaimsRaceSweeps(t *testing.T) {
	parent := t.TempDir()
	stop := make(chan struct{})
	var sweepers sync.WaitGroup
	for i := 0; i < 3; i++ {
		sweepers.Add(1)
		go func() {
			defer sweepers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					Sweep(parent)
				}
			}
		}()
	}
	var owners sync.WaitGroup
	errs := make(chan error, 240)
	for w := 0; w < 4; w++ {
		owners.Add(1)
		go func() {
			defer owners.Done()
			for i := 0; i < 60; i++ {
				dest := filepath.Join(parent, fmt.Sprintf("target-%d-%d", w, i))
				data := func(w io.Writer) error { _, err := w.Write(make([]byte, 4096)); return err }
				var err error
				if w%2 == 0 { // a temporary file that is its own lock
					err = WriteFileAtomic(dest, data)
				} else { // an owner directory
					var d *Dir
					if d, err = Claim(parent); err == nil {
						err = d.WriteFile(dest, data)
						if rerr := d.Release(); err == nil {
							err = rerr
						}
					}
				}
				if err == nil {
					err = os.Remove(dest)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	owners.Wait()
	close(stop)
	sweepers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if left := names(t, parent); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
}
