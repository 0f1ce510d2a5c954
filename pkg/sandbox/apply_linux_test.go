package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMain lets this test binary be the exec step, as oprov is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ExecCommand {
		os.Exit(Main(os.Args[2:]))
	}
	if os.Getenv(typeIntoEnv) != "" {
		typeInto()
		return
	}
	os.Exit(m.Run())
}

// confined runs argv through the exec step under spec and gives its combined output.
func confined(t *testing.T, spec Spec, env []string, argv ...string) (string, error) {
	t.Helper()
	sup := Probe()
	if sup.LandlockABI < abiScope || !sup.Seccomp {
		t.Skipf("this kernel lacks Landlock ABI %d or seccomp: %+v", abiScope, sup)
	}
	spec, err := Plan(spec, sup)
	if err != nil {
		t.Fatal(err)
	}
	args, err := spec.Args(argv[0], argv[1:])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestApplyConfines(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.txt"), []byte("allowed"), 0o644)
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("secret"), 0o644)
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	spec := Spec{Name: "test", Exec: []string{"/lib", "/lib64", "/usr/lib", sh, "/usr/bin/cat", "/usr/bin/unshare"}, Read: []string{dir}, Write: []string{"/dev/null"}}
	spec.Exec = existingPaths(spec.Exec)
	for _, tc := range []struct {
		argv []string
		want string
		ok   bool
	}{
		{[]string{"/usr/bin/cat", filepath.Join(dir, "ok.txt")}, "allowed", true},
		{[]string{"/usr/bin/cat", filepath.Join(other, "secret.txt")}, "Permission denied", false},
		{[]string{sh, "-c", "echo x > " + filepath.Join(dir, "new")}, "Permission denied", false},
		{[]string{"/usr/bin/unshare", "-U", "/usr/bin/cat", "/dev/null"}, "Operation not permitted", false},
		{[]string{"/usr/bin/ls", dir}, "oprov sandbox: exec /usr/bin/ls: permission denied", false},
	} {
		out, err := confined(t, spec, []string{"PATH=/usr/bin:/bin"}, tc.argv...)
		if (err == nil) != tc.ok || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v, %q; want ok=%v and %q", tc.argv, err, out, tc.ok, tc.want)
		}
	}
}

func TestApplyRefusesBadSpec(t *testing.T) {
	out, err := exec.Command(os.Args[0], ExecCommand, "{not json", "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "sandbox specification") {
		t.Errorf("a bad spec: %v, %s", err, out)
	}
	b, _ := json.Marshal(Spec{Name: "none"}) // ABI 0, no seccomp, no best effort
	out, err = exec.Command(os.Args[0], ExecCommand, string(b), "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to start the provider unconfined") {
		t.Errorf("a spec with nothing planned: %v, %s", err, out)
	}
	b, _ = json.Marshal(Spec{Name: "missing", ABI: 7, Seccomp: true, Read: []string{"/nonexistent/x"}})
	out, err = exec.Command(os.Args[0], ExecCommand, string(b), "/bin/true").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "/nonexistent/x") {
		t.Errorf("a missing path: %v, %s", err, out)
	}
}

func existingPaths(ps []string) []string {
	var out []string
	for _, p := range ps {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// typeIntoEnv makes this test binary a hostile provider (typeInto) instead of the tests.
const typeIntoEnv = "OPROV_TEST_TYPE_INTO"

// typeInto is what a hostile provider does to the user's terminal: it types a command into it
// with TIOCSTI (and TIOCLINUX's paste) on its stdin and on fd 3, and says what happened and
// whether it still has a controlling terminal.
func typeInto() {
	for _, fd := range []int{0, 3} {
		for _, c := range []byte("echo typed\n") {
			if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); e != 0 {
				fmt.Printf("fd %d TIOCSTI: %v\n", fd, e)
				break
			}
		}
		sub := byte(3) // TIOCL_PASTESEL
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub))); e != 0 {
			fmt.Printf("fd %d TIOCLINUX: %v\n", fd, e)
		}
	}
	// The high half of ioctl's request is ignored by the kernel: a filter must not be fooled.
	c := byte('x')
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, 3, unix.TIOCSTI|1<<32, uintptr(unsafe.Pointer(&c))); e != 0 {
		fmt.Printf("fd 3 TIOCSTI|1<<32: %v\n", e)
	}
	sid, _ := unix.Getsid(0)
	fmt.Printf("session leader: %v\n", sid == os.Getpid())
	var in, null unix.Stat_t
	unix.Fstat(0, &in)
	unix.Stat("/dev/null", &null)
	fmt.Printf("stdin is /dev/null: %v\n", in.Rdev == null.Rdev && in.Mode&unix.S_IFMT == unix.S_IFCHR)
}

// openPty makes a pseudo-terminal and gives its two ends.
func openPty(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	ptmx = os.NewFile(uintptr(m), "/dev/ptmx")
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptmx, pts
}

// TestApplyNoTerminalInjection: a sandboxed provider started with the user's terminal as its
// stdin (as go-plugin starts it) and holding another descriptor of it cannot type into it:
// its stdin is /dev/null, it is in a session of its own, and TIOCSTI and TIOCLINUX are refused.
func TestApplyNoTerminalInjection(t *testing.T) {
	sup := Probe()
	if sup.LandlockABI < abiScope || !sup.Seccomp {
		t.Skipf("this kernel lacks Landlock ABI %d or seccomp: %+v", abiScope, sup)
	}
	_, pts := openPty(t)
	self, err := filepath.EvalSymlinks(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	spec, err := Plan(Spec{Name: "test", Exec: existingPaths([]string{"/lib", "/lib64", "/usr/lib", self}), Write: []string{"/dev/null"}}, sup)
	if err != nil {
		t.Fatal(err)
	}
	args, err := spec.Args(self, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = []string{typeIntoEnv + "=1"}
	cmd.Stdin, cmd.ExtraFiles = pts, []*os.File{pts}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the hostile provider: %v\n%s", err, out)
	}
	t.Logf("the hostile provider says:\n%s", out)
	queued, err := unix.IoctlGetInt(int(pts.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	if queued != 0 {
		t.Errorf("the sandboxed provider typed %d bytes into the terminal", queued)
	}
	for _, want := range []string{"stdin is /dev/null: true", "fd 3 TIOCSTI: operation not permitted",
		"fd 3 TIOCLINUX: operation not permitted", "fd 3 TIOCSTI|1<<32: operation not permitted", "session leader: true"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the hostile provider does not say %q", want)
		}
	}
}

// A path granted where it led when it was judged (a far side's narrowing) is opened without
// following links: a link swapped into its place afterwards, leading to another provider's or the
// user's files, makes the step refuse to start, where without NoLinks the rule would follow it.
func TestApplyNoLinksRefusesASwappedLink(t *testing.T) {
	base, secret := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(secret, "id_ed25519"), []byte("the far user's key"), 0o600)
	judged := filepath.Join(base, "cloud")
	if err := os.Mkdir(judged, 0o755); err != nil {
		t.Fatal(err)
	}
	// After the check: the directory is replaced by a link to the secret one.
	os.Remove(judged)
	if err := os.Symlink(secret, judged); err != nil {
		t.Fatal(err)
	}
	sh, _ := filepath.EvalSymlinks("/bin/sh")
	spec := Spec{Name: "test", Exec: existingPaths([]string{"/lib", "/lib64", "/usr/lib", sh, "/usr/bin/cat"}), Read: []string{judged}, Write: []string{"/dev/null"}}
	argv := []string{"/usr/bin/cat", filepath.Join(judged, "id_ed25519")}
	out, err := confined(t, spec, []string{"PATH=/usr/bin:/bin"}, argv...)
	if err != nil || !strings.Contains(out, "the far user's key") {
		t.Fatalf("without NoLinks the rule follows the link (what this test guards against): %v, %q", err, out)
	}
	spec.NoLinks = []string{judged}
	out, err = confined(t, spec, []string{"PATH=/usr/bin:/bin"}, argv...)
	if err == nil || strings.Contains(out, "the far user's key") || !strings.Contains(out, "became a link") {
		t.Errorf("with NoLinks: %v, %q; want a refusal naming the link", err, out)
	}
	// A path with no link in it opens as before.
	real := filepath.Join(base, "real")
	os.Mkdir(real, 0o755)
	os.WriteFile(filepath.Join(real, "ok"), []byte("fine"), 0o644)
	spec.Read, spec.NoLinks = []string{real}, []string{real}
	if out, err := confined(t, spec, []string{"PATH=/usr/bin:/bin"}, "/usr/bin/cat", filepath.Join(real, "ok")); err != nil || !strings.Contains(out, "fine") {
		t.Errorf("a path without links: %v, %q", err, out)
	}
}
