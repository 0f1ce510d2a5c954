package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/oprov/oprov/pkg/oci"
	"github.com/oprov/oprov/pkg/sign"
)

// TestPasswordsFromTheStreams: login's prompts and a key's password are read from the injected
// streams, not from the process's standard input.
func TestPasswordsFromTheStreams(t *testing.T) {
	ctx := context.Background()
	ios, out, errb := testIO()
	ios.InTTY = true
	ios.In = strings.NewReader("alice\nsecret\n")
	var got []string
	ios.Factory.Login = func(ctx context.Context, host, username, password string, opts oci.Options) error {
		got = append(got, host, username, password)
		return nil
	}
	if err := runLogin(ctx, &loginOptions{io: ios, Host: "registry.example.com", output: textOut}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "registry.example.com alice secret" {
		t.Errorf("login got %q", got)
	}
	if !strings.Contains(errb.String(), "Username: ") || !strings.Contains(errb.String(), "Password: ") {
		t.Errorf("login prompts on stderr: %q", errb)
	}
	if out.String() != "Logged in to registry.example.com as alice\n" {
		t.Errorf("login output %q", out)
	}

	t.Setenv(sign.PasswordEnv, "")
	os.Unsetenv(sign.PasswordEnv)
	ios, _, _ = testIO()
	ios.InTTY = true
	ios.In = strings.NewReader("pw\npw\nthis\nthat\n")
	pass := passwordFunc(ios)
	if pw, err := pass(true); err != nil || string(pw) != "pw" {
		t.Errorf("confirmed password: %q, %v", pw, err)
	}
	if _, err := pass(true); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("two different passwords: %v", err)
	}
}
