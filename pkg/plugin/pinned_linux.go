package plugin

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
)

// runPinned makes cmd exec the executable open as f instead of looking its path up again:
// f becomes the child's descriptor 3+k and the child execs /proc/self/fd/(3+k), which is that
// very file whatever its path names by then (argv[0] stays the path). Only for an ELF executable:
// a script's interpreter would be handed /proc/self/fd/N as the script's name, and scripts find
// their own files beside $0 (they are exec'd by path, after OpenExecutable's check). Without
// /proc, the path is used too.
func runPinned(cmd *exec.Cmd, f *os.File) {
	if !pinnable(f) {
		return
	}
	cmd.Path = "/proc/self/fd/" + strconv.Itoa(3+len(cmd.ExtraFiles))
	cmd.ExtraFiles = append(cmd.ExtraFiles, f)
}

// pinnable reports whether the executable open as f can be exec'd from its descriptor: an ELF
// executable, on a system with /proc/self/fd.
func pinnable(f *os.File) bool {
	magic := make([]byte, 4)
	if n, _ := f.ReadAt(magic, 0); n != 4 || !bytes.Equal(magic, []byte("\x7fELF")) {
		return false
	}
	_, err := os.Stat("/proc/self/fd")
	return err == nil
}
