package loader_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oprov/oprov/loader"
	"github.com/oprov/oprov/loader/config"
)

// A remote or sandbox block whose label selects no provider the configuration requires (a typo)
// is an error at its line: otherwise the provider would run here, or unconfined, without a word.
// A sandbox "*" block never is.
func TestBlockSelectingNothingIsAnError(t *testing.T) {
	w := newWorld(t)
	for name, c := range map[string]struct{ block, want string }{
		"remote typo":  {`remote "example.com/acme/helo" { command = ["ssh", "far"] }`, `:6: remote "example.com/acme/helo" selects no provider`},
		"sandbox typo": {`sandbox "example.com/acme/helo" {}`, `:6: sandbox "example.com/acme/helo" selects no provider`},
		"sandbox *":    {`sandbox "*" {}`, ""},
		"remote ns":    {`remote "example.com/acme/*" { command = ["ssh", "far"] }`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			dir := w.project(t, map[string]string{"hello": "1.0.0"}, "")
			p := filepath.Join(dir, config.FileName)
			old, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, append(old, []byte(c.block+"\n")...), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = loader.Open(dir)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
}
