package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// Connection flags every client command takes, which may also be given
// before the command (`oecp --server URL apply …`, as kubectl and gh
// allow): those with a value, and the switches.
var (
	globalValueFlags = []string{"server", "token-file", "ca-file"}
	globalBoolFlags  = []string{"allow-plaintext", "json"}
)

// hoistGlobalFlags moves the global flags given before the command to
// just after the command (and the subcommand of a group of root), where
// its own flag parsing reads them; args that start with the command are
// returned as they are. A flag before the command that is not global, or
// flags with no command after them, is a usage error.
func hoistGlobalFlags(root *cobra.Command, args []string) ([]string, error) {
	var flags []string
	i := 0
	for ; i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--"; i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch {
		case slices.Contains(globalBoolFlags, name):
			flags = append(flags, args[i])
		case slices.Contains(globalValueFlags, name) && hasValue:
			flags = append(flags, args[i])
		case slices.Contains(globalValueFlags, name):
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag needs an argument: %s", args[i])
			}
			flags = append(flags, args[i], args[i+1])
			i++
		default:
			return nil, fmt.Errorf("%s cannot come before the command (only %s can; give the others after it)", args[i], globalFlagList())
		}
	}
	if len(flags) == 0 {
		return args, nil
	}
	rest := args[i:]
	if len(rest) == 0 {
		return nil, fmt.Errorf("no command after %s", strings.Join(flags, " "))
	}
	at := 1
	if g := subcommand(root, rest[0]); g != nil && g.HasSubCommands() && len(rest) > 1 && !strings.HasPrefix(rest[1], "-") {
		at = 2
	}
	out := append(slices.Clone(rest[:at]), flags...)
	return append(out, rest[at:]...), nil
}

// globalFlagList names the flags that may come before the command.
func globalFlagList() string {
	var names []string
	for _, n := range append(slices.Clone(globalValueFlags), globalBoolFlags...) {
		names = append(names, "--"+n)
	}
	return strings.Join(names, ", ")
}
