package tests

import (
	"fmt"
	"testing"

	"github.com/oprov/oprov/tests/internal/peers"
)

func TestZZProbe(t *testing.T) {
	tofu := peers.Require(t, "tofu")
	f := newLoaderFixture(t, helloConfig)
	r := oprov(t, f.env, "run", "-C", f.cfg, "-v", "--", tofu, "apply", "-auto-approve", "-input=false", "-no-color")
	fmt.Println("exit", r.Code, r.Stdout, r.Stderr)
}
