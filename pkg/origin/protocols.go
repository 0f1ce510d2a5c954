package origin

import (
	"errors"
	"fmt"
	"strings"

	"github.com/apparentlymart/go-versions/versions"
)

// oprov launches providers over plugin protocol 5 or 6 (format.md §3), as OpenTofu does: a
// version that speaks neither could be mirrored but never run.
const launchableProtocols = "oprov (like OpenTofu) launches providers over protocol 5 or 6"

// unlaunchableError is a version whose plugin protocols oprov cannot launch.
type unlaunchableError struct {
	version   string
	protocols []string
}

func (e *unlaunchableError) Error() string { return "version " + e.version + " " + e.why() }

func (e *unlaunchableError) why() string {
	return fmt.Sprintf("speaks plugin protocol %s only; %s", strings.Join(e.protocols, " and "), launchableProtocols)
}

// checkProtocols checks the plugin protocols an origin advertises for a version. Each must be a
// version number ("5", "5.0", "6.1"); one of them must have major version 5 or 6. An empty list
// says nothing and passes, as it does in OpenTofu.
func checkProtocols(version string, protocols []string) error {
	ok := len(protocols) == 0
	for _, s := range protocols {
		v, err := versions.ParseVersion(s)
		if err != nil {
			return fmt.Errorf("the origin advertises a malformed plugin protocol %q for version %s", s, version)
		}
		if v.Major == 5 || v.Major == 6 {
			ok = true
		}
	}
	if !ok {
		return &unlaunchableError{version: version, protocols: protocols}
	}
	return nil
}

// launchable keeps the versions whose protocols oprov can launch. When the constraint chose
// some that it can and some that it cannot, the others are passed over with a warning, as a
// user mirroring a range (or every version, old protocol-4 releases included) would expect;
// when none is left (a single version asked for, say) that is an error naming each version and
// its protocols. A malformed protocol string is always an error.
func launchable(chosen []Version, warn func(string)) ([]Version, error) {
	var ok []Version
	var refused []*unlaunchableError
	for _, v := range chosen {
		var ue *unlaunchableError
		switch err := checkProtocols(v.Version, v.Protocols); {
		case err == nil:
			ok = append(ok, v)
		case errors.As(err, &ue):
			refused = append(refused, ue)
		default:
			return nil, err
		}
	}
	switch {
	case len(ok) == 0 && len(refused) == 1:
		return nil, refused[0]
	case len(ok) == 0:
		var each []string
		for _, ue := range refused {
			each = append(each, fmt.Sprintf("%s (%s)", ue.version, strings.Join(ue.protocols, ", ")))
		}
		return nil, fmt.Errorf("no version asked for speaks a plugin protocol oprov can launch: %s; %s", strings.Join(each, ", "), launchableProtocols)
	}
	if warn != nil {
		for _, ue := range refused {
			warn(fmt.Sprintf("version %s is left out: it %s", ue.version, ue.why()))
		}
	}
	return ok, nil
}
