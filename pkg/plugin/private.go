package plugin

import (
	"os"
	"path/filepath"
)

// Private directories. A provider that tofu reattaches to serves plain gRPC on a unix socket, so
// the socket's directory is all that keeps other users of the machine from calling it directly,
// bypassing the proxy's audit and rules. Every provider socket and every proxy socket therefore
// lives in a directory oprov makes with mode 0700 for one run (a group, or one Start) and removes
// when it ends:
//
//   - it is the provider's PLUGIN_UNIX_SOCKET_DIR, where go-plugin's server makes its socket
//     (go-plugin's client sets that variable only with a RunnerFunc, so without it a provider
//     listens on /tmp/pluginNNN with the umask's mode);
//   - it is the provider's TMPDIR too, for providers whose go-plugin predates
//     PLUGIN_UNIX_SOCKET_DIR and for SDKs that make their own socket under the temporary
//     directory (the Python tf SDK);
//   - the proxy's socket is made inside the run's directory, beside the members' own, never in a
//     member's, which is that provider's TMPDIR and which a sandbox lets it write.

// maxBaseLen bounds the temporary directory the private one is made in: a unix socket's path is
// limited to about 104 bytes, and go-plugin adds some 40 below it.
const maxBaseLen = 40

// makePrivateDir makes a new directory of mode 0700 for one run's sockets.
func makePrivateDir() (string, error) {
	base := os.TempDir()
	if len(base) > maxBaseLen {
		if st, err := os.Stat("/tmp"); err == nil && st.IsDir() {
			base = "/tmp" // macOS's per-user TMPDIR is too long for socket paths below it
		}
	}
	dir, err := os.MkdirTemp(base, "oprov-run-")
	if err != nil {
		return "", err
	}
	// MkdirTemp makes it 0700 whatever the umask; say so, should that ever change.
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// subDir makes a private directory inside a private one.
func subDir(parent, name string) (string, error) {
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}
