package websocket

import "time"

// timeNow is the default clock for the upgrade-time expiry check.
var timeNow = time.Now
