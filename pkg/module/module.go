// Package module resolves the module calls of an OpenTofu configuration: every call, recursively
// (modules calling modules), to a module tree fetched from its source (a module registry through
// the Module Registry Protocol, git to a commit, an HTTP archive, an OCI module package to a
// digest; local paths as part of their caller), each tree zipped deterministically and hashed
// (h1:, zh:) as pkg/modulepkg does, checked against the module lock, and the required_providers
// of every module in the tree, remote ones included.
package module

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/oprov/oprov/manifest"
)

// Requirement is what a configuration asks of one provider: all the version constraints given
// for it across every module of the tree.
type Requirement struct {
	Addr        manifest.ProviderAddress
	Constraints []string    // each as written; all must hold
	Where       []hcl.Range // where each was declared
}

// ConstraintString joins the constraints as the lock file records them.
func (r *Requirement) ConstraintString() string {
	seen := map[string]bool{}
	var out []string
	for _, c := range r.Constraints {
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return strings.Join(out, ", ")
}

// Resolved is one remote module call, resolved and fetched.
type Resolved struct {
	// Call is the module call's path, as OpenTofu writes it: module.vpc.module.subnets.
	Call string
	// Key is the call's key in .terraform/modules/modules.json (vpc.subnets), and the name of its
	// directory there.
	Key string
	// Source is the full source address (registry addresses with their hostname), as the module
	// lock records it. It includes the subdirectory, if any.
	Source string
	Kind   Kind
	// Version is the registry version, the git commit, or the OCI manifest digest; "" for an
	// HTTP archive, which has none.
	Version string
	// Constraints is the call's version argument (registry modules), as written.
	Constraints string
	// Subdir is the module's directory inside its package ("" for the package's root).
	Subdir string
	// H1 and ZH hash Zip (modulepkg.Hashes): h1: of its files, zh: of its bytes.
	H1, ZH string
	// Zip is modulepkg.Zip of the whole package the module came in (its root is the package's).
	Zip []byte
	// OriginChecksum is the origin's own checksum where it has one (the OCI manifest digest).
	OriginChecksum string
	// FromInstalled is set when the module was taken from its installed copy (no request).
	FromInstalled bool
	// Auth says how an oci:// module was authenticated (its signature under the policy).
	Auth string
	// Range is where the call is written.
	Range hcl.Range
	// Requires holds the required_providers of this module and of its local modules.
	Requires map[string]*Requirement
}

// Where names the call's file and line.
func (r *Resolved) Where() string { return where(r.Range) }

func where(rng hcl.Range) string {
	if rng.Filename == "" {
		return "(unknown)"
	}
	return fmt.Sprintf("%s:%d", rng.Filename, rng.Start.Line)
}

// Tree is what a walk found: every remote module (callers before the modules they call, calls in
// file order) and the provider requirements of every module, local and remote.
type Tree struct {
	Modules      []*Resolved
	Requirements map[string]*Requirement
}
