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
// user, never from its content: Open is the only way a command reads a recording.
func Open(path string, lim Limits) (*Recording, error) {
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

// IsRecordingFile reports whether path is a regular file that begins with a recording's header.
// It is for refusing, never for reading: a command that takes a provider refuses a recording
// given in its place, and names the flag that takes one.
func IsRecordingFile(path string) bool {
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

// Replayer gives the replayer of the provider at addr, or of the only provider when addr is
// empty; the error names the providers the recording holds.
func (r *Recording) Replayer(addr string, ignore []Ignore) (*Replayer, error) {
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
