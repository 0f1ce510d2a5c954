package cache

import (
	"fmt"
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a cache is private by its access control lists: every directory from the cache's
// volume down, and every file of an entry, owned by this user, SYSTEM or the Administrators, and
// granting write access to no one else. The default place (under %LOCALAPPDATA%) is so.

// checkAbove checks a directory above the cache. A volume's root (C:\) lets every user create
// directories in it, as /tmp does, without letting them change another's: it is judged by its
// owner only.
func checkAbove(p, cacheDir string) error {
	st, err := os.Lstat(p)
	if err != nil || st.Mode()&fs.ModeSymlink != 0 {
		return err
	}
	return checkACL(p, cacheDir, isVolumeRoot(p))
}

// checkOwn checks a directory (dir) or file of the cache: a directory where one is expected,
// never a link, and private by its access control list.
func checkOwn(p, cacheDir string, dir bool) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.Mode()&(fs.ModeSymlink|fs.ModeIrregular) != 0 || dir && !st.IsDir() {
		return fmt.Errorf("%s in the cache %s is a link or not a directory (%s): nothing was used (run 'oprov cache verify --fix')", p, cacheDir, st.Mode().Type())
	}
	return checkACL(p, cacheDir, false)
}

func isVolumeRoot(p string) bool {
	return len(p) <= 3 && len(p) >= 2 && p[1] == ':'
}

// writeAccess is every right that lets a holder change a file or directory, or what is in it.
const writeAccess = windows.FILE_WRITE_DATA | windows.FILE_APPEND_DATA | windows.FILE_WRITE_EA |
	windows.FILE_WRITE_ATTRIBUTES | fileDeleteChild | windows.DELETE | windows.WRITE_DAC |
	windows.WRITE_OWNER | windows.GENERIC_WRITE | windows.GENERIC_ALL

// fileDeleteChild lets a directory's holder remove what is in it (winnt.h's FILE_DELETE_CHILD).
const fileDeleteChild = 0x40

// checkACL refuses p unless its owner is trusted and (unless ownerOnly) no entry of its access
// list grants write access to anyone untrusted.
func checkACL(p, cacheDir string, ownerOnly bool) error {
	sd, err := windows.GetNamedSecurityInfo(p, windows.SE_FILE_OBJECT,
		windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("%s (for the cache %s): its access control list cannot be read (%v), so nothing was used (set OPROV_CACHE_DIR to a cache of your own)", p, cacheDir, err)
	}
	owner, _, err := sd.Owner()
	if err != nil || !trustedSID(owner) {
		return fmt.Errorf("%s (for the cache %s) belongs to %s, not to you: its owner can swap a provider between its check and its launch, so nothing was used (set OPROV_CACHE_DIR to a cache of your own)", p, cacheDir, owner)
	}
	if ownerOnly {
		return nil
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil { // no list at all grants everyone everything
		return sharedError(p, cacheDir, "Everyone")
	}
	for i := uint32(0); i < uint32(dacl.AceCount); i++ {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return sharedError(p, cacheDir, "an entry it cannot read")
		}
		if ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || ace.Mask&writeAccess == 0 {
			continue
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart))
		if !trustedSID(sid) && !sid.IsWellKnown(windows.WinCreatorOwnerSid) {
			return sharedError(p, cacheDir, sid.String())
		}
	}
	return nil
}

func sharedError(p, cacheDir, who string) error {
	return fmt.Errorf("%s in the cache %s can be written by %s: whoever can write it can swap a provider between its check and its launch, so nothing was used (remove that entry with 'icacls', or set OPROV_CACHE_DIR to a cache of your own)", p, cacheDir, who)
}

// trustedInstaller is the service that owns Windows' own files.
const trustedInstaller = "S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464"

// trustedSID reports whether sid is this user, SYSTEM, the Administrators or TrustedInstaller:
// the accounts that can change this user's files anyway.
func trustedSID(sid *windows.SID) bool {
	if sid == nil {
		return false
	}
	if sid.IsWellKnown(windows.WinLocalSystemSid) || sid.IsWellKnown(windows.WinBuiltinAdministratorsSid) || sid.String() == trustedInstaller {
		return true
	}
	u, err := windows.GetCurrentProcessToken().GetTokenUser()
	return err == nil && sid.Equals(u.User.Sid)
}
