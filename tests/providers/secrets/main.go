// Command terraform-provider-secrets is a test provider that puts a distinct secret, a string
// starting "S3CRET-", in every place a provider's values can travel (see secrets.go), and
// appends the name of each place whose secret it received back to the file $SECRETS_LOG, so a
// test can tell that the secret really crossed the wire before it checks that no recording and
// no audit line kept it. It serves plugin protocol 6: the framework for everything but
// secrets_stack, which is served below it (stack.go).
package main

import (
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

const address = "example.com/acme/secrets"

func main() {
	framework := providerserver.NewProtocol6(&secretsProvider{})
	if err := tf6server.Serve(address, func() tfprotov6.ProviderServer { return withStack{framework()} }); err != nil {
		log.Fatal(err)
	}
}
