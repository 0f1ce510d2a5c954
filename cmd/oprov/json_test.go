package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"
)

var (
	osArch    = regexp.MustCompile(`^[a-z0-9]+_[a-z0-9]+$`)
	snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// checkJSONShape walks a command's JSON output: keys are snake_case, a "platform" is an "os_arch"
// string, "platforms" is a list, and no object spells a platform as {"os", "arch"}.
func checkJSONShape(t *testing.T, cmd string, out *bytes.Buffer) {
	t.Helper()
	var doc any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", cmd, err, out)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		case map[string]any:
			_, hasOS := v["os"]
			if _, hasArch := v["arch"]; hasOS && hasArch {
				t.Errorf("%s: %s spells a platform as an object: %v", cmd, path, v)
			}
			for k, e := range v {
				if !snakeCase.MatchString(k) {
					t.Errorf("%s: key %s.%s is not snake_case", cmd, path, k)
				}
				if s, ok := e.(string); k == "platform" && (!ok || !osArch.MatchString(s)) {
					t.Errorf("%s: %s.platform is %v, want an \"os_arch\" string", cmd, path, e)
				}
				if _, ok := e.([]any); k == "platforms" && !ok {
					t.Errorf("%s: %s.platforms is %v, want a list", cmd, path, e)
				}
				walk(path+"."+k, e)
			}
		}
	}
	walk("", doc)
}

// TestJSONShapesAgree runs the commands that describe releases and platforms with -o json and
// checks every document's shape.
func TestJSONShapesAgree(t *testing.T) {
	ctx := context.Background()
	dist := packageHello(t)
	ios, out, _ := testIO()
	if err := runPackage(ctx, &packageOptions{io: ios, BinDir: fakeBinaries(t, "linux_amd64"), Version: "1.0.0", Name: "hello", OutDir: t.TempDir(), output: jsonOut}); err != nil {
		t.Fatal(err)
	}
	checkJSONShape(t, "package", out)
	repo, _ := pushedLayout(t)
	key, pub := keyPair(t, "k")
	signLayout(t, repo, key, false)
	for name, run := range map[string]func(*IOStreams) error{
		"push": func(ios *IOStreams) error {
			return runPush(ctx, &pushOptions{io: ios, Sources: []string{dist}, Repo: "oci-layout:" + t.TempDir(), output: jsonOut})
		},
		"inspect": func(ios *IOStreams) error {
			return runInspect(ctx, &inspectOptions{io: ios, Ref: repo + ":1.0.0", output: jsonOut})
		},
		"versions": func(ios *IOStreams) error {
			return runInspect(ctx, &inspectOptions{io: ios, Ref: repo, output: jsonOut})
		},
		"pull": func(ios *IOStreams) error {
			return runPull(ctx, &pullOptions{io: ios, Ref: repo + ":1.0.0", OutDir: t.TempDir(), output: jsonOut})
		},
		"verify": func(ios *IOStreams) error {
			return runVerify(ctx, &verifyOptions{io: ios, Ref: repo + ":1.0.0", Keys: []string{pub}, AllZips: true, output: jsonOut})
		},
		"discover": func(ios *IOStreams) error {
			return runDiscover(ctx, &discoverOptions{io: ios, Ref: repo + ":1.0.0", Depth: 2, output: jsonOut})
		},
	} {
		ios, out, _ := testIO()
		if err := run(ios); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkJSONShape(t, name, out)
	}
}
