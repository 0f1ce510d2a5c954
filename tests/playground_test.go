package tests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

var exportLine = regexp.MustCompile(`^export (\w+)=(\S+)`)

// TestPlayground follows the README's playground: it starts tests/playground, takes the variables
// it prints, mirrors acme/hello from its origin into its TLS registry with nothing but 127.0.0.1,
// inspects the result, and stops it with Ctrl-C, which must remove everything it made.
func TestPlayground(t *testing.T) {
	peers.Require(t, "registry")
	bin := filepath.Join(t.TempDir(), "playground")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(repoRoot, "tests", "playground")).CombinedOutput(); err != nil {
		t.Fatalf("building the playground: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	vars := map[string]string{}
	lines := bufio.NewScanner(stdout)
	for len(vars) < 4 && lines.Scan() {
		if m := exportLine.FindStringSubmatch(lines.Text()); m != nil {
			vars[m[1]] = m[2]
		}
	}
	if vars["REGISTRY"] == "" || vars["ORIGIN"] == "" || vars["SSL_CERT_FILE"] == "" || vars["PATH"] != peers.Dir()+":$PATH" {
		t.Fatalf("the playground printed %v", vars)
	}
	env := []string{"SSL_CERT_FILE=" + vars["SSL_CERT_FILE"], "HOME=" + t.TempDir()}
	to := vars["REGISTRY"] + "/mirror/acme/hello"
	r := mustOprov(t, env, "mirror", vars["ORIGIN"], "--to", to, "-o", "json")
	if !strings.Contains(r.Stdout, `"version": "1.0.0"`) {
		t.Errorf("mirror from the playground's origin: %s", r.Stdout)
	}
	mustOprov(t, env, "inspect", to+":1.0.0")

	root := filepath.Dir(filepath.Dir(vars["SSL_CERT_FILE"]))
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the playground did not stop cleanly on Ctrl-C: %v", err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the playground left %s behind (%v)", root, err)
	}
}
