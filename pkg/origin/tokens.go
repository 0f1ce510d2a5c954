package origin

import (
	"github.com/oprov/oprov/pkg/tofufiles"

	"fmt"
	"net/http"

	"github.com/oprov/oprov/pkg/tfcreds"
)

// authError explains a 401 or 403 from host (where the request ended up, after redirects): what
// token was sent, and if none was, how to give one.
func (o *Client) authError(err error, host string) error {
	if h, _ := tfcreds.Normalize(host); h != o.authHost {
		return fmt.Errorf("%w: %s is not the origin registry %s, so oprov sends it no token", err, host, o.Host)
	}
	if o.token != nil {
		return fmt.Errorf("%w: %s refused the API token from %s (check that it is current and may read this provider)", err, o.Host, o.token.Source)
	}
	file := "~/.tofurc"
	if files := tfcreds.ConfigFiles(); len(files) > 0 {
		file = files[0]
	}
	label, qerr := tofufiles.CLIString(o.Host)
	if qerr != nil {
		label = "\"" + o.Host + "\""
	}
	how := fmt.Sprintf("add credentials %s { token = \"...\" } to your CLI configuration (%s)", label, file)
	if env := tfcreds.EnvName(o.Host); env != "" {
		how = "set " + env + ", or " + how
	}
	if o.credsErr != nil {
		how += "; note that the CLI configuration could not be read: " + o.credsErr.Error()
	}
	return fmt.Errorf("%w: %s wants an API token: %s", err, o.Host, how)
}

// bearerTransport sends the origin's token with requests to the origin's own host over https,
// and with no other: not to another host that a download_url or a redirect points at.
type bearerTransport struct {
	next  http.RoundTripper
	host  string // the origin's, normalized
	token string
}

func (b *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "https" {
		if h, err := tfcreds.Normalize(req.URL.Host); err == nil && h == b.host {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+b.token)
		}
	}
	return b.next.RoundTrip(req)
}
