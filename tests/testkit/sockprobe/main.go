// Command sockprobe stands in for tofu under `oprov run` in the socket tests: it reads
// TF_REATTACH_PROVIDERS, finds every unix socket the providers listen on (Linux /proc) and the
// proxies' sockets, and prints one JSON line per socket: its path, the mode of every directory
// from it up to the first that is 0700, and whether a process running as user nobody can
// connect to it. With PROBE_DIAL set it only dials that socket (exit 0 when connected).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type report struct {
	Path          string   `json:"path"`
	Of            string   `json:"of"` // "provider" or "proxy"
	Dirs          []string `json:"dirs"`
	PrivateDir    string   `json:"private_dir"` // the nearest directory of mode 0700 above it
	OwnerConnects bool     `json:"owner_connects"`
	NobodyConnect bool     `json:"nobody_connects"`
	NobodyError   string   `json:"nobody_error,omitempty"`
}

func main() {
	if p := os.Getenv("PROBE_DIAL"); p != "" {
		c, err := net.DialTimeout("unix", p, 2*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		c.Close()
		os.Exit(0)
	}
	var reattach map[string]struct {
		Pid  int
		Addr struct{ Network, String string }
	}
	if err := json.Unmarshal([]byte(os.Getenv("TF_REATTACH_PROVIDERS")), &reattach); err != nil {
		fail(err)
	}
	self, _ := os.Executable()
	enc := json.NewEncoder(os.Stdout)
	for _, r := range reattach {
		socks := map[string]string{r.Addr.String: "proxy"}
		for _, s := range listening(r.Pid) {
			socks[s] = "provider"
		}
		for s, of := range socks {
			rep := report{Path: s, Of: of}
			for d := filepath.Dir(s); d != "/"; d = filepath.Dir(d) {
				st, err := os.Stat(d)
				if err != nil {
					fail(err)
				}
				rep.Dirs = append(rep.Dirs, fmt.Sprintf("%s %o", d, st.Mode().Perm()))
				if st.Mode().Perm() == 0o700 && rep.PrivateDir == "" {
					rep.PrivateDir = d
				}
			}
			rep.OwnerConnects = dial(self, s, nil) == nil
			err := dial(self, s, &syscall.Credential{Uid: 65534, Gid: 65534})
			rep.NobodyConnect = err == nil
			if err != nil {
				rep.NobodyError = err.Error()
			}
			enc.Encode(rep)
		}
	}
}

// dial runs this program with PROBE_DIAL as the given user (nil: this one).
func dial(self, sock string, cred *syscall.Credential) error {
	cmd := exec.Command(self)
	cmd.Env = []string{"PROBE_DIAL=" + sock}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		return fmt.Errorf("refused: %s", strings.TrimSpace(string(out)))
	}
	if err != nil {
		fail(fmt.Errorf("running the dialer: %v %s", err, out))
	}
	return nil
}

// listening gives the paths of the unix sockets a process has open: its fds' inodes, looked up
// in /proc/net/unix.
func listening(pid int) []string {
	inodes := map[string]bool{}
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		fail(err)
	}
	for _, fd := range fds {
		l, _ := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if in, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		fail(err)
	}
	defer f.Close()
	var out []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 8 && inodes[fs[6]] && strings.HasPrefix(fs[7], "/") {
			out = append(out, fs[7])
		}
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sockprobe:", err)
	os.Exit(1)
}
