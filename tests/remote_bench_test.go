package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
)

// remoteBenchConfig is n greetings, made at once.
func remoteBenchConfig(n int) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    hello = {
      source  = "example.com/acme/hello"
      version = "~> 1.0"
    }
  }
}

resource "hello_greeting" "many" {
  count = %d
  name  = "n${count.index}"
}
`, n)
}

var crossed = regexp.MustCompile(`(\d+) calls, (\d+) bytes sent, (\d+) received`)

// BenchmarkRemote sets a provider run over SSH on 127.0.0.1 beside the same provider run here:
// launch to handshake (oprov run -- true: install from a warm cache, launch, handshake, stop),
// a 200-resource apply from empty state through oprov run, with the bytes that cross the
// connection per call, and the same apply by plain tofu after oprov init (plain/), which starts
// the provider several times, its starts sharing one connection. docs/performance.md reports it.
func BenchmarkRemote(b *testing.B) {
	far := farSide(b)
	tofu := peers.Require(b, "tofu")
	f := newLoaderFixture(b, remoteBenchConfig(200))
	env := append(f.env, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")
	mustOprov(b, env, "lock", "-C", f.cfg)
	local, err := os.ReadFile(filepath.Join(f.cfg, "oprov.hcl"))
	if err != nil {
		b.Fatal(err)
	}
	for _, where := range []string{"local", "remote"} {
		hcl := string(local)
		if where == "remote" {
			hcl += far.remoteBlock()
		}
		writeFile(b, filepath.Join(f.cfg, "oprov.hcl"), hcl)
		mustOprov(b, env, "run", "-C", f.cfg, "--", "true") // warm: the far side's cache holds the zip
		b.Run("launch/"+where, func(b *testing.B) {
			for b.Loop() {
				mustOprov(b, env, "run", "-C", f.cfg, "--", "true")
			}
		})
		b.Run("apply200/"+where, func(b *testing.B) {
			var calls, bytes int64
			for b.Loop() {
				os.Remove(filepath.Join(f.cfg, "terraform.tfstate"))
				os.Remove(filepath.Join(f.cfg, "terraform.tfstate.backup"))
				r := mustOprov(b, env, "run", "-v", "-C", f.cfg, "--", tofu, "apply", "-auto-approve", "-input=false")
				if m := crossed.FindStringSubmatch(r.Stderr); m != nil {
					c, _ := strconv.ParseInt(m[1], 10, 64)
					s, _ := strconv.ParseInt(m[2], 10, 64)
					rc, _ := strconv.ParseInt(m[3], 10, 64)
					calls, bytes = calls+c, bytes+s+rc
				} else if where == "remote" {
					b.Fatalf("no count of what crossed the connection:\n%s", r.Stderr)
				}
				if !strings.Contains(r.Stdout, "200 added") {
					b.Fatalf("apply did not add 200:\n%s", r.Stdout)
				}
			}
			if calls > 0 {
				b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
				b.ReportMetric(float64(bytes)/float64(calls), "bytes/call")
			}
		})
		mustOprov(b, append(env, "OPROV_TOFU="+tofu), "init", "-C", f.cfg)
		plain := append(env, "OPROV="+oprovBin)
		b.Run("apply200/plain/"+where, func(b *testing.B) {
			logins := 0
			for b.Loop() {
				os.Remove(filepath.Join(f.cfg, "terraform.tfstate"))
				os.Remove(filepath.Join(f.cfg, "terraform.tfstate.backup"))
				before := far.logins(b)
				out := mustTofu(b, tofu, f.cfg, plain, "apply", "-auto-approve", "-input=false")
				logins += far.logins(b) - before
				if !strings.Contains(out, "200 added") {
					b.Fatalf("apply did not add 200:\n%s", out)
				}
			}
			b.ReportMetric(float64(logins)/float64(b.N), "ssh-logins/op")
		})
	}
}
