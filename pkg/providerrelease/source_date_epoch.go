package providerrelease

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// SourceDateEpoch reads SOURCE_DATE_EPOCH (reproducible-builds.org): the time to record instead of
// the wall clock. ok is false when it is not set.
func SourceDateEpoch() (t time.Time, ok bool, err error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, false, nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, false, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970 (unset it, or set it to e.g. $(git log -1 --format=%%ct))", s)
	}
	return time.Unix(sec, 0).UTC(), true, nil
}
