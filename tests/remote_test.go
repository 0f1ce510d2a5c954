package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/internal/peers"
)

// remoteUser is the far side's account: a user of the tests' own, reached only by key.
const remoteUser = "oprov-remote-test"

// sshFarSide is a real OpenSSH server on 127.0.0.1 with a throwaway host key, letting remoteUser
// in with one key; the far side's oprov is a copy in that user's home.
type sshFarSide struct {
	home, key, knownHosts, oprov string
	port                         int
	cmd                          *exec.Cmd
	log                          *os.File
	dir                          string
}

// stopSSHD ends the shared sshd, if a test started it (TestMain, after every test).
func stopSSHD() {
	if sshSide != nil {
		sshSide.cmd.Process.Kill()
		sshSide.cmd.Wait()
		sshSide.log.Close()
		os.RemoveAll(sshSide.dir)
	}
}

var (
	sshOnce sync.Once
	sshSide *sshFarSide
	sshErr  error
)

// farSide starts sshd once per test run (shared by every remote test) and gives it.
func farSide(t *testing.T) *sshFarSide {
	t.Helper()
	sshd := peers.Require(t, "sshd")
	peers.Require(t, "ssh")
	if os.Geteuid() != 0 {
		peers.Missing(t, "root, to make the far side's user "+remoteUser)
	}
	sshOnce.Do(func() { sshSide, sshErr = startSSHD(sshd) })
	if sshErr != nil {
		t.Fatal(sshErr)
	}
	return sshSide
}

func runCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func startSSHD(sshd string) (*sshFarSide, error) {
	if _, err := user.Lookup(remoteUser); err != nil {
		if err := runCmd("useradd", "--create-home", "--shell", "/bin/sh", remoteUser); err != nil {
			return nil, err
		}
	}
	// No password at all ("*", not the locked "!"): sshd without PAM lets a key in only then.
	if err := runCmd("usermod", "-p", "*", remoteUser); err != nil {
		return nil, err
	}
	u, err := user.Lookup(remoteUser)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oprov-sshd-")
	if err != nil {
		return nil, err
	}
	f := &sshFarSide{home: u.HomeDir, key: filepath.Join(dir, "id"), knownHosts: filepath.Join(dir, "known_hosts")}
	hostKey := filepath.Join(dir, "host_key")
	for _, k := range []string{f.key, hostKey} {
		if err := runCmd("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k); err != nil {
			return nil, err
		}
	}
	pub, err := os.ReadFile(f.key + ".pub")
	if err != nil {
		return nil, err
	}
	// The far side's files: its key, its oprov, and the secret only it may read.
	f.oprov = filepath.Join(f.home, "bin", "oprov")
	bin, err := os.ReadFile(oprovBin)
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(f.home, ".ssh", "authorized_keys"), pub, 0o600},
		{f.oprov, bin, 0o755},
		{filepath.Join(f.home, "greeting"), []byte("Howdy\n"), 0o600},
	} {
		if err := os.MkdirAll(filepath.Dir(w.path), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return nil, err
		}
	}
	if err := runCmd("chown", "-R", remoteUser+":", f.home); err != nil {
		return nil, err
	}
	if err := os.Chmod(f.home, 0o700); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AllowUsers %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
`, f.port, hostKey, filepath.Join(dir, "sshd.pid"), remoteUser)), 0o600); err != nil {
		return nil, err
	}
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(hostPub))
	if err := os.WriteFile(f.knownHosts, []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", f.port, fields[0], fields[1])), 0o600); err != nil {
		return nil, err
	}
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	f.cmd = exec.Command(sshd, "-D", "-e", "-f", cfg)
	if f.log, err = os.Create(filepath.Join(dir, "sshd.log")); err != nil {
		return nil, err
	}
	f.cmd.Stderr = f.log
	f.dir = dir
	if err := f.cmd.Start(); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", f.port))
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			return nil, fmt.Errorf("sshd did not listen on port %d", f.port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return f, nil
}

// command is the remote block's command: ssh to the far user, running its oprov.
func (f *sshFarSide) command(hostArgs ...string) []string {
	return append([]string{"ssh", "-T", "-i", f.key, "-p", strconv.Itoa(f.port),
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + f.knownHosts,
		remoteUser + "@127.0.0.1", f.oprov, "provider", "host", "--stdio"}, hostArgs...)
}

// remoteBlock is oprov.hcl's remote block for hello.
func (f *sshFarSide) remoteBlock(hostArgs ...string) string {
	var quoted []string
	for _, a := range f.command(hostArgs...) {
		quoted = append(quoted, strconv.Quote(a))
	}
	return "remote \"example.com/acme/hello\" {\n  command = [" + strings.Join(quoted, ", ") + "]\n}\n"
}

// remoteHelloConfig greets with the word in the file "greeting" in the provider's working
// directory: the far user's home, which only that user can read, over there; nothing here.
const remoteHelloConfig = `terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}

provider "hello" {
  greeting_file = "greeting"
}

resource "hello_greeting" "world" {
  name = "remote"
}

output "message" { value = hello_greeting.world.message }
`

// TestRemoteOverSSH: the Go provider from OCI runs as the far user through a real sshd, for
// tofu and terraform: with the remote block, apply reads the far user's file; without it, the
// same configuration fails on that read here.
func TestRemoteOverSSH(t *testing.T) {
	far := farSide(t)
	for _, tool := range []string{"tofu", "terraform"} {
		t.Run(tool, func(t *testing.T) {
			bin := peers.Require(t, tool)
			f := newLoaderFixture(t, remoteHelloConfig)
			local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
			if err != nil {
				t.Fatal(err)
			}
			env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
			mustOprov(t, env, "lock", "-C", f.cfg)

			r := oprov(t, env, "run", "-C", f.cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			if r.Code == 0 || !strings.Contains(r.Stdout+r.Stderr, "Cannot read the greeting file") {
				t.Fatalf("without the remote block, apply should fail on the read here: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}

			writeFile(t, filepath.Join(f.cfg, "oprov.hcl"), string(local)+far.remoteBlock())
			start := time.Now()
			r = mustOprov(t, env, "run", "-v", "-C", f.cfg, "--", bin, "apply", "-auto-approve", "-input=false")
			t.Logf("remote apply took %s", time.Since(start))
			if !strings.Contains(r.Stdout, "Howdy, remote!") {
				t.Errorf("the far side's greeting is not in the output:\n%s", r.Stdout)
			}
			if !strings.Contains(r.Stderr, `on remote "example.com/acme/hello" (ssh)`) {
				t.Errorf("-v does not say where the provider runs:\n%s", r.Stderr)
			}
		})
	}
}
