package bundle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ociref "github.com/oprov/oprov/pkg/oci"
)

// openDst opens the destination of one of the bundle's repositories for writing. When the load
// goes into an OCI layout directory (--to oci-layout:DIR), the repository's own layout, DIR/REPO,
// is made through an os.Root on DIR first, with the directories and files the layout store writes
// checked the same way: a repository name (checked already by checkRepository) or a symbolic link
// planted below DIR cannot lead the writes out of DIR. The store itself then writes by path
// inside a layout made and checked this way.
func (l *load) openDst(ctx context.Context, repo string, ref ociref.Ref) (ociref.Target, error) {
	if ref.IsLayout() {
		if err := l.makeLayoutIn(repo); err != nil {
			return nil, err
		}
	}
	return l.opts.Registry.Open(ctx, ref, true)
}

// makeLayoutIn makes REPO's layout below the --to layout directory through an os.Root on it.
func (l *load) makeLayoutIn(repo string) error {
	base := strings.TrimSuffix(strings.TrimPrefix(l.opts.To, ociref.LayoutScheme), "/")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(base)
	if err != nil {
		return err
	}
	defer root.Close()
	dir := filepath.FromSlash(repo)
	refuse := func(err error) error {
		return fmt.Errorf("load: the repository %s would be written outside %s (%v): a link below %s leads out of it; remove it, or load elsewhere (nothing of %s was written)", repo, base, err, base, repo)
	}
	for _, d := range []string{dir, filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, "ingest")} {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return refuse(err)
		}
	}
	for _, f := range []string{"oci-layout", "index.json"} {
		st, err := root.Lstat(filepath.Join(dir, f))
		if err == nil && !st.Mode().IsRegular() {
			return refuse(fmt.Errorf("%s is not a regular file", filepath.Join(repo, f)))
		}
	}
	return nil
}
