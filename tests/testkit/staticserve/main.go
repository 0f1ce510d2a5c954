// Command staticserve is the benchmarks' reference: Go's http.FileServer over TLS, with the
// default http.Server settings, serving a directory in a process of its own (as `oprov serve`
// runs in one), so the two are compared on the same footing.
//
//	staticserve DIR CERT KEY    listens on 127.0.0.1 (a free port) and prints the address
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: staticserve DIR CERT KEY")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	srv := &http.Server{Handler: http.FileServer(http.Dir(os.Args[1]))}
	fmt.Fprintln(os.Stderr, srv.ServeTLS(ln, os.Args[2], os.Args[3]))
	os.Exit(1)
}
