package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oprov/oprov/tests/testkit/testreg"
)

// TestCopyResumesAfterKill: a copy killed midway, run again, completes and uploads only what was
// missing; the copy carries the signature along.
func TestCopyResumesAfterKill(t *testing.T) {
	ca := testreg.NewCA(t, t.TempDir())
	a := testreg.Start(t, testreg.Options{CA: ca})
	b := testreg.Start(t, testreg.Options{CA: ca})
	env := []string{"SSL_CERT_FILE=" + ca.File, "COSIGN_PASSWORD=test"}
	keys := t.TempDir()
	mustOprov(t, env, "keygen", "--output-key-prefix", filepath.Join(keys, "k"))
	dist := t.TempDir()
	syntheticRelease(t, dist, 40) // 5 platforms x 40 MiB: long enough to interrupt
	src := a.Host + "/providers/acme/bench"
	p := pushJSON(t, env, dist, src, "--sign", "--key", filepath.Join(keys, "k.key"))
	// zips and manifests, the empty config, the index, and the signature bundle's manifest and layer
	total := len(p.Platforms)*2 + 2 + 2

	// Kill the first copy once part of it has landed.
	cmd := exec.Command(oprovBin, "copy", src+":1.0.0", b.Host+"/providers/acme/bench")
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(b.Storage, "docker", "registry", "v2", "blobs", "sha256")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n := 0
		filepath.WalkDir(blobs, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "data" {
				n++
			}
			return nil
		})
		if n >= 2 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the first copy finished before it could be interrupted")
	}

	var res struct {
		Uploaded int
		Skipped  int
	}
	r := mustOprov(t, env, "copy", src+":1.0.0", b.Host+"/providers/acme/bench", "-o", "json")
	decodeJSON(t, r.Stdout, &res)
	if res.Uploaded == 0 || res.Skipped == 0 {
		t.Errorf("the re-run uploaded %d and skipped %d: it should skip what the first run finished", res.Uploaded, res.Skipped)
	}
	if res.Uploaded+res.Skipped != total {
		t.Errorf("the re-run saw %d items, want the whole graph of %d", res.Uploaded+res.Skipped, total)
	}
	// The copy is whole and still verifies.
	mustOprov(t, env, "verify", b.Host+"/providers/acme/bench:1.0.0", "--key", filepath.Join(keys, "k.pub"), "--all-platforms")
	r = mustOprov(t, env, "inspect", b.Host+"/providers/acme/bench:1.0.0", "-o", "json")
	var ins struct {
		IndexDigest string `json:"index_digest"`
	}
	decodeJSON(t, r.Stdout, &ins)
	if ins.IndexDigest != p.IndexDigest {
		t.Errorf("copied index %s, source %s", ins.IndexDigest, p.IndexDigest)
	}
	fmt.Fprintf(os.Stderr, "re-run uploaded %d, skipped %d\n", res.Uploaded, res.Skipped)
}
