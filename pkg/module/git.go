package module

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/oprov/oprov/internal/scratch"
	"github.com/oprov/oprov/pkg/oci"
)

// gitTimeout bounds one git command: a clone of a module repository, or a checkout.
const gitTimeout = 10 * time.Minute

// git clones the repository (as OpenTofu does, with the git program) into a temporary directory
// and checks out the ref (a tag, a branch or a commit; the default branch when none), recording
// the commit it is at. Git writes, not oprov, so what it writes is measured before it grows: the
// clone (objects only, no checkout) as fetched, then the tree at the commit from what git lists
// of it, both charged to the walk's budget before the checkout writes a file.
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
	var clone usage
	clone.bytes, clone.files = scratch.Usage(dir)
	if err := w.budget.charge("the git clone", clone); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	commit, err := w.gitCommit(ctx, dir, src.Ref)
	var tree usage
	if err == nil {
		tree, err = w.chargeTree(ctx, dir, commit)
	}
	if err != nil {
		w.budget.credit(clone)
		os.RemoveAll(dir)
		return fail(err)
	}
	if _, err := w.runGit(ctx, dir, "checkout", "--quiet", "--detach", commit); err != nil {
		w.budget.credit(tree)
		w.budget.credit(clone)
		os.RemoveAll(dir)
		return fail(err)
	}
	// What was charged was an estimate; what the directory holds now is charged instead.
	w.budget.credit(tree)
	w.budget.credit(clone)
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

// chargeTree charges the walk's budget with the files of the commit's tree, as git lists them
// (blob sizes), before they are checked out, and says what it charged.
func (w *walker) chargeTree(ctx context.Context, dir, commit string) (usage, error) {
	out, err := w.runGit(ctx, dir, "ls-tree", "-r", "-l", "--full-tree", "--end-of-options", commit)
	if err != nil {
		return usage{}, err
	}
	var u usage
	for _, line := range strings.Split(out, "\n") {
		meta, _, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 || f[1] != "blob" {
			continue // a submodule (a commit) is not checked out
		}
		n, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil || n < 0 {
			return usage{}, fmt.Errorf("git ls-tree gave a size %q", f[3])
		}
		u.bytes += n
		u.files++
	}
	if err := w.budget.charge(fmt.Sprintf("the git tree at %s (%d files, %s, before checkout)", commit, u.files, oci.FormatSize(u.bytes)), u); err != nil {
		return usage{}, err
	}
	return u, nil
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
