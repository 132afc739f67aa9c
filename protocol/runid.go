package protocol

import (
	"regexp"
	"strconv"
	"time"
)

// uuidV7 is the canonical lowercase text of a UUIDv7, the run ids that
// clients mint (client.NewRunID).
var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// RunIDTime is the time a UUIDv7 run id was minted, read from its first 48
// bits; ok is false for an id that is not a UUIDv7.
func RunIDTime(id string) (t time.Time, ok bool) {
	if !uuidV7.MatchString(id) {
		return time.Time{}, false
	}
	ms, err := strconv.ParseUint(id[0:8]+id[9:13], 16, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(ms)), true
}
