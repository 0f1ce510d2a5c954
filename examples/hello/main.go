// Command terraform-provider-hello is oprov's example provider: a resource, a data source and a
// provider function, all about greetings. It speaks plugin protocol 6.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
)

// version is set by `oprov package` (-X main.version=...).
var version = "dev"

func main() {
	debug := flag.Bool("debug", false, "run with support for debuggers")
	flag.Parse()
	err := providerserver.Serve(context.Background(), newProvider(version), providerserver.ServeOpts{
		Address: "example.com/acme/hello",
		Debug:   *debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
