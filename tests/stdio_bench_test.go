package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/oprov/oprov/pkg/plugin"
	"github.com/oprov/oprov/tests/testkit/peers"
)

// stdioPackagedExe packages the Python example for this machine and unpacks it, as tofu would
// install it; its launcher finds oprov on PATH.
func stdioPackagedExe(b testing.TB) string {
	b.Helper()
	dist := b.TempDir()
	host := runtime.GOOS + "_" + runtime.GOARCH
	mustOprov(b, nil, "package", "--stdio", filepath.Join(repoRoot, "examples", "stdio-python"), "--version", "0.1.0", "--out-dir", dist, "--platform", host)
	return extractProvider(b, filepath.Join(dist, "terraform-provider-kv_0.1.0_"+host+".zip"), "terraform-provider-kv_v0.1.0")
}

// timeStart is launch to handshake (schema false) or to the provider's schema answered (schema
// true), as oprov schema starts a provider (automatic mutual TLS).
func timeStart(b *testing.B, exe string, schema bool) time.Duration {
	ctx := context.Background()
	start := time.Now()
	p, err := plugin.Start(ctx, plugin.Options{Path: exe, Env: []string{"PATH=" + filepath.Dir(oprovBin) + string(os.PathListSeparator) + os.Getenv("PATH")}})
	if err != nil {
		b.Fatal(err)
	}
	if schema {
		if _, err := p.Schema(ctx); err != nil {
			b.Fatal(err)
		}
	}
	d := time.Since(start)
	p.Stop(ctx)
	return d
}

// BenchmarkStdioLaunch compares the packaged Python stdio example (sh launcher, oprov as host,
// CPython started on the first call) with examples/hello (Go): launch to handshake, and launch
// to the schema answered (which for the stdio provider includes starting Python).
func BenchmarkStdioLaunch(b *testing.B) {
	host := runtime.GOOS + "_" + runtime.GOARCH
	hello := extractProvider(b, filepath.Join(helloRelease(b), "terraform-provider-hello_1.0.0_"+host+".zip"), "terraform-provider-hello_v1.0.0")
	kv := stdioPackagedExe(b)
	rounds := max(b.N, 10)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		for _, schema := range []bool{false, true} {
			for name, exe := range map[string]string{"hello": hello, "stdio": kv} {
				key := fmt.Sprintf("%s/%v", name, schema)
				times[key] = append(times[key], timeStart(b, exe, schema))
			}
		}
	}
	b.StopTimer()
	fmt.Printf("\nlaunch, %d rounds (median):\n", rounds)
	for _, schema := range []bool{false, true} {
		h, s := median(times[fmt.Sprintf("hello/%v", schema)]), median(times[fmt.Sprintf("stdio/%v", schema)])
		label := "to handshake"
		if schema {
			label = "to schema answered"
		}
		fmt.Printf("  examples/hello %8s   stdio-python %8s   ratio %.1fx   [%s]\n", h.Round(100*time.Microsecond), s.Round(100*time.Microsecond), float64(s)/float64(h), label)
	}
}

const hello200 = `terraform {
  required_providers {
    hello = { source = "example.com/acme/hello" }
  }
}
provider "hello" {
  greeting = "Hello"
}
resource "hello_greeting" "n" {
  count = 200
  name  = "n${count.index}"
}
`

const kv200 = `terraform {
  required_providers {
    kv = { source = "example.com/acme/kv" }
  }
}
provider "kv" { path = "%s" }
resource "kv_entry" "n" {
  count = 200
  key   = "n${count.index}"
  value = "v"
}
`

// BenchmarkStdioApply200 times oprov run -- tofu apply of 200 resources with the Python and the
// JavaScript examples kept as source against the same with examples/hello (Go, kept as source),
// each from an empty state, interleaved.
func BenchmarkStdioApply200(b *testing.B) {
	tofu := peers.Require(b, "tofu")
	env := []string{"OPROV_CACHE_DIR=" + filepath.Join(b.TempDir(), "cache"), "TF_CLI_CONFIG_FILE=", "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "HOME=" + b.TempDir()}
	dirs := map[string]string{}
	for name, src := range map[string]string{"hello": "hello", "python": "stdio-python", "js": "stdio-js"} {
		cfg := b.TempDir()
		if err := os.CopyFS(filepath.Join(cfg, "p"), os.DirFS(filepath.Join(repoRoot, "examples", src))); err != nil {
			b.Fatal(err)
		}
		addr, tf := "example.com/acme/kv", fmt.Sprintf(kv200, filepath.Join(cfg, "kv.json"))
		if name == "hello" {
			addr, tf = "example.com/acme/hello", hello200
		}
		writeFile(b, filepath.Join(cfg, "main.tf"), tf)
		writeFile(b, filepath.Join(cfg, "oprov.hcl"), fmt.Sprintf("provider %q {\n  source = \"./p\"\n}\n", addr))
		mustOprov(b, env, "run", "-C", cfg, "--", tofu, "plan", "-input=false") // builds hello once
		dirs[name] = cfg
	}
	rounds := max(b.N, 3)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < rounds; i++ {
		for _, name := range []string{"hello", "python", "js"} {
			cfg := dirs[name]
			for _, f := range []string{"terraform.tfstate", "terraform.tfstate.backup", "kv.json"} {
				os.Remove(filepath.Join(cfg, f))
			}
			times[name] = append(times[name], timeCmd(b, env, oprovBin, "run", "-C", cfg, "--", tofu, "apply", "-auto-approve", "-input=false"))
		}
	}
	b.StopTimer()
	h := median(times["hello"])
	fmt.Printf("\noprov run -- tofu apply of 200 resources, %d rounds (median):\n  examples/hello %s", rounds, h.Round(time.Millisecond))
	for _, name := range []string{"python", "js"} {
		m := median(times[name])
		fmt.Printf("   stdio-%s %s (%.2fx)", name, m.Round(time.Millisecond), float64(m)/float64(h))
	}
	fmt.Println()
}
