package workspace

import "regexp"

// commitIDRE is a full SHA-1 object id as git prints it.
var commitIDRE = regexp.MustCompile(`^[0-9a-f]{40}$`)
