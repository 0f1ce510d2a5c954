package module

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/oprov/oprov/internal/scratch"
)

// gitTimeout bounds one git command: a clone of a module repository, or a checkout.
const gitTimeout = 10 * time.Minute

// git clones the repository (as OpenTofu does, with the git program) into a temporary directory
// and checks out the ref (a tag, a branch or a commit; the default branch when none), recording
// the commit it is at. The clone is measured against the walk's budget when it is done (git
// writes it, not oprov).
func (w *walker) git(ctx context.Context, r *Resolved, src Source) (*fetched, error) {
	if f, ok := w.fetched[src.Package()]; ok {
		r.Version, r.OriginChecksum = f.version, f.origin
		return f, nil
	}
	dir := w.newDir("git")
	fail := func(err error) (*fetched, error) {
		return nil, fmt.Errorf("%s: %s: %s: %w", r.Where(), r.Call, r.Source, err)
	}
	if _, err := w.runGit(ctx, "", "clone", "--quiet", "--no-checkout", "--", src.URL, dir); err != nil {
		return fail(err)
	}
	commit, err := w.gitCommit(ctx, dir, src.Ref)
	if err != nil {
		return fail(err)
	}
	if _, err := w.runGit(ctx, dir, "checkout", "--quiet", "--detach", commit); err != nil {
		return fail(err)
	}
	var held usage
	held.bytes, held.files = scratch.Usage(dir)
	if err := w.budget.charge("the git checkout", held); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	r.Version = commit
	r.OriginChecksum = commit
	f := &fetched{raw: dir, held: held, version: commit, origin: commit}
	w.remember(src, f)
	return f, nil
}

// gitCommit finds the commit a ref names in a fresh clone: a tag, a remote branch, or a commit.
func (w *walker) gitCommit(ctx context.Context, dir, ref string) (string, error) {
	if ref == "" {
		ref = "HEAD"
	}
	for _, cand := range []string{"refs/tags/" + ref, "refs/remotes/origin/" + ref, ref} {
		out, err := w.runGit(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", cand+"^{commit}")
		if err == nil {
			return strings.TrimSpace(out), nil
		}
	}
	return "", fmt.Errorf("the repository has no tag, branch or commit %q", ref)
}

// runGit runs the git program with no prompt for credentials, no external or file transports,
// and no configuration of the user's that could run a command (core.fsmonitor, hooks).
func (w *walker) runGit(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	full := append([]string{
		"-c", "protocol.ext.allow=never", "-c", "protocol.file.allow=never",
		"-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "advice.detachedHead=false",
	}, args...)
	cmd := exec.CommandContext(ctx, w.opts.Git, full...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GIT_LFS_SKIP_SMUDGE=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "..."
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("git %s: gave up after %s", args[0], gitTimeout)
		}
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, msg)
	}
	return out.String(), nil
}

// remember keeps a fetched package for the rest of the walk.
func (w *walker) remember(src Source, f *fetched) {
	if w.fetched == nil {
		w.fetched = map[string]*fetched{}
	}
	w.fetched[src.Package()] = f
}
