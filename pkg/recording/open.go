package recording

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// headerPrefix is how every recording begins: its header line, as Create writes it.
const headerPrefix = `{"oprov_recording":`

// Open reads the file at path, which the user named as a recording. It is only ever read: a file
// that does not begin with a recording's header is refused, whatever its mode, and so is
// anything but a regular file (a directory, a FIFO, a device). What a file is comes from the
// user, never from its content: open is the only way a command reads a recording (OpenDriver).
func open(path string, lim Limits) (*Recording, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("recording %s is not a regular file (%s): give the file oprov run --record wrote", path, st.Mode().Type())
	}
	ok, err := beginsAsRecording(f)
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%s is not an oprov recording: it does not begin with the %s header line; nothing was run. Make one with oprov run --record FILE -- tofu apply", path, headerPrefix)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	return Read(f, path, lim)
}

// InputError is a recording the user named that cannot be used as named: not a recording, not a
// regular file, or holding no provider the address picks. The command that named it says how to
// give one (a usage error); other errors (the replay key, a tampered recording) are not this.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// OpenDriver reads the recording the user named at path, unlocks it with this user's replay key
// and gives the driver of its provider at addr (or of its only provider when addr is empty):
// the recording answers the calls, and nothing runs.
func OpenDriver(path, addr string, lim Limits) (*Driver, error) {
	rec, err := open(path, lim)
	if err != nil {
		return nil, &InputError{Err: err}
	}
	key, err := ReplayKey()
	if err != nil {
		return nil, err
	}
	if err := rec.Unlock(key); err != nil {
		return nil, fmt.Errorf("recording %s: %w", path, err)
	}
	rp, err := rec.replayer(addr, nil)
	if err != nil {
		return nil, &InputError{Err: fmt.Errorf("recording %s: %w", path, err)}
	}
	return rp.Driver()
}

// Sniffed is what a file given where a provider to run goes looks like.
type Sniffed int

const (
	// NotRecording is anything else: a provider to run, a directory, a path that does not exist.
	NotRecording Sniffed = iota
	// RecordingFile is a regular file that begins with a recording's header.
	RecordingFile
	// RecordingName is a file named as recordings are (*.jsonl) that does not begin as one.
	RecordingName
)

// Sniff says whether path looks like a recording, by its first bytes or its name. It is for
// refusing, never for reading: a command that takes a provider refuses a recording given in its
// place, so that a script written for an old form never runs what was put in a recording's place.
func Sniff(path string) Sniffed {
	st, err := os.Stat(path)
	if err != nil || st.IsDir() {
		return NotRecording
	}
	if isRecordingFile(path) {
		return RecordingFile
	}
	if strings.HasSuffix(strings.ToLower(path), ".jsonl") {
		return RecordingName
	}
	return NotRecording
}

// isRecordingFile reports whether path is a regular file that begins with a recording's header.
func isRecordingFile(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	ok, _ := beginsAsRecording(f)
	return ok
}

// beginsAsRecording reads the start of r: blank space, then the header's first bytes.
func beginsAsRecording(r io.Reader) (bool, error) {
	head := make([]byte, 512)
	n, err := io.ReadFull(r, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return false, err
	}
	return bytes.HasPrefix(bytes.TrimLeft(head[:n], " \t\r\n"), []byte(headerPrefix)), nil
}

// replayer gives the replayer of the provider at addr, or of the only provider when addr is
// empty; the error names the providers the recording holds.
func (r *Recording) replayer(addr string, ignore []Ignore) (*Replayer, error) {
	var found []string
	for _, rp := range r.Replayers(ignore) {
		if addr == "" && len(r.Order) == 1 || rp.Address() == addr {
			return rp, nil
		}
		found = append(found, fmt.Sprintf("%q", rp.Address()))
	}
	if addr == "" {
		return nil, fmt.Errorf("the recording holds %d providers (%s): name one with --address", len(found), strings.Join(found, ", "))
	}
	return nil, fmt.Errorf("the recording holds no provider %q; it holds %s: name one with --address", addr, strings.Join(found, ", "))
}
