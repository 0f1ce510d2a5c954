package plugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The runtime directory is reached only through directories no one else can change: below a
// directory another user owns ($XDG_RUNTIME_DIR kept by sudo -E: root's secrets below the user's
// /run/user/UID), or one others may write that is not sticky, another user can rename the
// private directory away after its check and put a link to a directory of theirs in its place.
func TestRemoteShareRuntimeDirAboveIsPrivate(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777) // writable by all, not sticky
	t.Setenv("XDG_RUNTIME_DIR", shared)
	if dir, err := runtimeDir(); err == nil || !strings.Contains(err.Error(), shared) {
		t.Errorf("a runtime directory below %s, which anyone may write and is not sticky, was taken: %s %v", shared, dir, err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky) // sticky, as /tmp: others cannot rename what is not theirs
	if _, err := runtimeDir(); err != nil {
		t.Errorf("below a sticky directory: %v", err)
	}
	// A link on the way is judged where it leads.
	link := filepath.Join(t.TempDir(), "link")
	open := filepath.Join(t.TempDir(), "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	os.Symlink(open, link)
	t.Setenv("XDG_RUNTIME_DIR", link)
	if _, err := runtimeDir(); err == nil {
		t.Error("a runtime directory through a link to a directory anyone may write was taken")
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest needs root, to give a directory to another user")
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_RUNTIME_DIR", theirs)
	if dir, err := runtimeDir(); err == nil || !strings.Contains(err.Error(), theirs) {
		t.Errorf("a runtime directory below another user's %s was taken: %s %v", theirs, dir, err)
	}
}
