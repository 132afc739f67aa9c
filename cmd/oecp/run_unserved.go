package main

import "fmt"

// unservedPrefix begins run/submit's refusal of a source repository the
// server does not serve (runs' admission).
const unservedPrefix = "repository is not served: "

// unserved explains that refusal: the graph is fine, the source is not.
func unserved(repo string) (why, todo string, ok bool) {
	return fmt.Sprintf("the server does not serve the repository %s", repo),
		fmt.Sprintf("give --source OWNER/NAME@BRANCH:REVISION of a repository it serves (without --source it is the origin of the git checkout here), or ask its operator to add %s to the server's --repos file", repo), true
}
