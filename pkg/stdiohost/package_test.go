package stdiohost

import "testing"

// IsLauncher knows Launcher's own bytes, whatever the version, and nothing else.
func TestIsLauncher(t *testing.T) {
	text := Launcher("kv", "1.2.3-rc.1+build")
	if !IsLauncher([]byte(text), "kv") {
		t.Error("its own launcher is not recognised")
	}
	for _, bad := range []string{text + ": '/'\n", text[:len(text)-1], Launcher("kv", "1'2")} {
		if IsLauncher([]byte(bad), "kv") {
			t.Errorf("a changed launcher is recognised:\n%s", bad)
		}
	}
	if IsLauncher([]byte(text), "other") {
		t.Error("another provider's launcher is recognised")
	}
}
