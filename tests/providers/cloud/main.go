// Command terraform-provider-aws is a stand-in for a cloud provider on the far side of a remote
// block (docs/remote.md): like a cloud SDK, it takes its credentials from three places at once,
// an AWS_* environment variable ($AWS_REGION), an instance metadata endpoint on a port
// ($AWS_EC2_METADATA_SERVICE_ENDPOINT) and a credential file (~/.aws/credentials), and its data
// source aws_caller says what it found in each, and why it found nothing where it did not. It
// serves plugin protocol 6 with the framework.
package main

import (
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"
)

const address = "registry.example.com/acme/aws"

func main() {
	if err := tf6server.Serve(address, providerserver.NewProtocol6(&cloudProvider{})); err != nil {
		log.Fatal(err)
	}
}
