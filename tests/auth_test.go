package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/tests/testkit/peers"
	"github.com/oprov/oprov/tests/testkit/testreg"
)

// TestBasicAuthCredentialsReachTofu: with DOCKER_CONFIG set, oprov login stores the credentials
// where OpenTofu does not look; the CLI configuration push prints (and tofurc prints, and install
// writes) points OpenTofu at them, so a plain tofu init with it works without further set-up.
// Without that block the same tofu init is refused, so the check can fail.
func TestBasicAuthCredentialsReachTofu(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	reg := testreg.Start(t, testreg.Options{Users: map[string]string{"alice": "s3cret"}})
	work := t.TempDir()
	dockerCfg := filepath.Join(work, "docker")
	// HOME and the XDG directories are empty: neither oprov nor tofu finds credentials there.
	env := []string{"DOCKER_CONFIG=" + dockerCfg, "HOME=" + filepath.Join(work, "home"), "XDG_CONFIG_HOME=", "XDG_RUNTIME_DIR=",
		"SSL_CERT_FILE=" + reg.CAFile, "OPROV_CACHE_DIR=" + filepath.Join(work, "cache")}
	login := exec.Command(oprovBin, "login", reg.Host, "-u", "alice", "--password-stdin")
	login.Env, login.Stdin = append(os.Environ(), env...), strings.NewReader("s3cret\n")
	if out, err := login.CombinedOutput(); err != nil {
		t.Fatalf("oprov login: %v\n%s", err, out)
	}
	repo := reg.Host + "/providers/acme/hello"
	push := pushJSON(t, env, helloRelease(t), repo, "--address", "example.com/acme/hello")
	credFile := filepath.Join(dockerCfg, "config.json")
	if !strings.Contains(push.TofuRC, "oci_default_credentials") || !strings.Contains(push.TofuRC, credFile) {
		t.Fatalf("push's CLI configuration does not point tofu at %s:\n%s", credFile, push.TofuRC)
	}

	t.Run("tofu init with the configuration push printed", func(t *testing.T) {
		cfg := tofuConfigDir(t)
		mustTofu(t, tofu, cfg, append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, push.TofuRC)), "init", "-input=false")
		// Control: without the credentials block, tofu finds no credentials and is refused.
		bare := strings.SplitN(push.TofuRC, "oci_default_credentials", 2)[0]
		if out, err := tofuRun(t, tofu, tofuConfigDir(t), append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, bare)), "init", "-input=false"); err == nil {
			t.Errorf("control: tofu init without the credentials block worked, so the check proves nothing:\n%s", out)
		}
	})
	t.Run("tofurc and install point tofu at the credentials too", func(t *testing.T) {
		cfg := tofuConfigDir(t)
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", reg.Host).Replace(
			"oci_mirror {\n  repository_template = \"%HOST%/providers/${namespace}/${type}\"\n  include = [\"example.com/acme/*\"]\n}\n"))
		rc := mustOprov(t, env, "tofurc", "-C", cfg).Stdout
		if !strings.Contains(rc, credFile) {
			t.Errorf("tofurc does not point tofu at %s:\n%s", credFile, rc)
		}
		mustTofu(t, tofu, tofuConfigDir(t), append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, rc)), "init", "-input=false")
		mustOprov(t, env, "install", "-C", cfg)
		written, err := os.ReadFile(filepath.Join(cfg, ".terraform", "oprov", "cli.tfrc"))
		if err != nil || !strings.Contains(string(written), credFile) {
			t.Errorf("install's CLI configuration does not point tofu at %s (%v):\n%s", credFile, err, written)
		}
		mustTofu(t, tofu, cfg, append(env, "TF_CLI_CONFIG_FILE="+filepath.Join(cfg, ".terraform", "oprov", "cli.tfrc")), "init", "-input=false")
	})
	t.Run("printed configuration appended to a user's with its own oci_default_credentials", func(t *testing.T) {
		cfg := tofuConfigDir(t)
		writeFile(t, filepath.Join(cfg, "oprov.hcl"), strings.NewReplacer("%HOST%", reg.Host).Replace(
			"oci_mirror {\n  repository_template = \"%HOST%/providers/${namespace}/${type}\"\n  include = [\"example.com/acme/*\"]\n}\n"))
		user := "oci_default_credentials {\n  docker_style_config_files = [\"" + credFile + "\"]\n}\n"
		userRC := writeRC(t, user)
		r := mustOprov(t, append(env, "TF_CLI_CONFIG_FILE="+userRC), "tofurc", "-C", cfg)
		if strings.Contains(r.Stdout, "oci_default_credentials") || !strings.Contains(r.Stderr, "left out the oci_default_credentials block") {
			t.Errorf("tofurc repeated the user's oci_default_credentials, or did not say it left it out:\n%s%s", r.Stdout, r.Stderr)
		}
		mustTofu(t, tofu, tofuConfigDir(t), append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, user+r.Stdout)), "init", "-input=false")
		// push says the same.
		pr := mustOprov(t, append(env, "TF_CLI_CONFIG_FILE="+userRC), "push", helloRelease(t), repo, "--address", "example.com/acme/hello", "-o", "json")
		var pushed struct{ TofuRC string }
		decodeJSON(t, pr.Stdout, &pushed)
		if strings.Contains(pushed.TofuRC, "oci_default_credentials") || !strings.Contains(pr.Stderr, "left out the oci_default_credentials block") {
			t.Errorf("push repeated the user's oci_default_credentials:\n%s%s", pr.Stdout, pr.Stderr)
		}
		mustTofu(t, tofu, tofuConfigDir(t), append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, user+pushed.TofuRC)), "init", "-input=false")
		// install keeps the user's block and adds none of its own.
		mustOprov(t, append(env, "TF_CLI_CONFIG_FILE="+userRC), "install", "-C", cfg)
		written := filepath.Join(cfg, ".terraform", "oprov", "cli.tfrc")
		if b, _ := os.ReadFile(written); strings.Count(string(b), "oci_default_credentials {") != 1 {
			t.Errorf("install's CLI configuration does not hold exactly one oci_default_credentials block:\n%s", b)
		}
		mustTofu(t, tofu, cfg, append(env, "TF_CLI_CONFIG_FILE="+written), "init", "-input=false")
		// Control: the unmerged text (no user configuration to merge with) appended makes tofu fail.
		bare := mustOprov(t, env, "tofurc", "-C", cfg).Stdout
		if out, err := tofuRun(t, tofu, tofuConfigDir(t), append(env, "TF_CLI_CONFIG_FILE="+writeRC(t, user+bare)), "init", "-input=false"); err == nil {
			t.Errorf("control: two oci_default_credentials blocks did not break tofu init, so the check proves nothing:\n%s", out)
		} else if !strings.Contains(out, "too many oci_default_credentials blocks") {
			t.Errorf("control: tofu init failed, but not for the duplicated block:\n%s", out)
		}
	})
}

// tofuConfigDir is a new configuration directory using examples/hello.
func tofuConfigDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "main.tf"), helloConfig)
	return dir
}

func writeRC(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tofurc")
	writeFile(t, p, text)
	return p
}

// TestPushOverPlainHTTPWarns: a push that went over plain HTTP says OpenTofu cannot install from
// there; one over TLS does not.
func TestPushOverPlainHTTPWarns(t *testing.T) {
	plain := testreg.Start(t, testreg.Options{PlainHTTP: true})
	r := mustOprov(t, nil, "push", helloRelease(t), plain.Host+"/providers/acme/hello", "-o", "json")
	var out struct{ Warnings []string }
	decodeJSON(t, r.Stdout, &out)
	if !strings.Contains(r.Stderr, "reached over plain HTTP") || !strings.Contains(r.Stderr, "cannot install from there") || len(out.Warnings) != 1 {
		t.Errorf("no plain-HTTP warning:\n%s%s", r.Stdout, r.Stderr)
	}
	tls := testreg.Start(t, testreg.Options{})
	r = mustOprov(t, nil, "push", helloRelease(t), tls.Host+"/providers/acme/hello", "--ca-file", tls.CAFile)
	if strings.Contains(r.Stderr, "plain HTTP") {
		t.Errorf("a TLS push warned about plain HTTP:\n%s", r.Stderr)
	}
}
