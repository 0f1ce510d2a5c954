package iox

import (
	"fmt"
	"strings"
)

// CheckComponent refuses a name from outside (a tag, a version, a provider's namespace) that is
// to become exactly one path component and is not one: empty, "." or "..", or holding a '/',
// a '\' or a NUL. It is the grammar's last word before a path is built; the write itself still
// goes through os.Root, so a name this misses cannot leave its directory either.
func CheckComponent(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("it is empty")
	case name == "." || name == "..":
		return fmt.Errorf("%q names a directory itself or its parent", name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%q holds a '/', a '\\' or a NUL, where one path component is wanted", name)
	}
	return nil
}
