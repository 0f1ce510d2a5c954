package main

import (
	"os"
	"strings"
	"sync"
)

// The secrets the configuration passes in (tests/replay_secrets_test.go writes them into it) and
// the ones the provider makes itself. Each names its place, so a test that finds one names where
// it leaked from.
const (
	// Given by the configuration.
	secretProviderConfig = "S3CRET-provider-config"     // provider "secrets" { token }: sensitive, from a sensitive variable
	secretSensitive      = "S3CRET-sensitive-attr"      // secrets_vault.password: sensitive
	secretWriteOnly      = "S3CRET-write-only"          // secrets_vault.wo_password: write-only (tofu)
	secretDynamic        = "S3CRET-dynamic-attr"        // secrets_vault.blob: a sensitive dynamic attribute holding an object
	secretNestedBlock    = "S3CRET-nested-block"        // secrets_vault.credential[*].secret: sensitive, in a list of blocks made by an HCL dynamic block
	secretDynTypedBlock  = "S3CRET-dynamic-typed-block" // secrets_stack.layer[*].secret: sensitive, in blocks that hold a dynamic attribute (a tuple on the wire)
	secretEphemeralConf  = "S3CRET-ephemeral-config"    // ephemeral secrets_token.seed: sensitive (tofu)
	secretMovedSource    = "S3CRET-moved-source"        // secrets_old.key: sensitive, moved to secrets_vault (tofu)
	secretFunctionArg    = "S3CRET-function-arg"        // provider::secrets::reveal(var.x), x sensitive (tofu)

	// Made by the provider.
	secretGenerated       = "S3CRET-generated"         // secrets_vault.generated: computed, sensitive
	secretPrivate         = "S3CRET-private-state"     // secrets_vault's private state
	secretMovedPrivate    = "S3CRET-moved-private"     // secrets_old's private state, the move's source_private (tofu)
	secretRawPrivate      = "S3CRET-raw-private"       // secrets_stack's private state (not the framework's encoding)
	secretDataSource      = "S3CRET-data-source"       // data secrets_lookup.value: computed, sensitive
	secretEphemeralResult = "S3CRET-ephemeral-result"  // ephemeral secrets_token.value, passed on to a write-only attribute (tofu)
	secretEphemeralPriv   = "S3CRET-ephemeral-private" // ephemeral secrets_token's private state (tofu)
	secretFunctionResult  = "S3CRET-function-result"   // what reveal returns besides its argument (tofu)
)

var seenMu sync.Mutex

// saw appends place to $SECRETS_LOG when got holds the secret want: the secret crossed the wire
// to the provider.
func saw(place, got, want string) {
	path := os.Getenv("SECRETS_LOG")
	if path == "" || !strings.Contains(got, want) {
		return
	}
	seenMu.Lock()
	defer seenMu.Unlock()
	if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		f.WriteString(place + "\n")
		f.Close()
	}
}
