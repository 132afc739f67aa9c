#!/bin/sh
# A fake agent CLI for the command driver (JSON turn on stdin, one
# {"session","text"} object on stdout), run with an empty environment in
# the run's workspace. $1 is the test's control directory. Each step writes
# its file; step one commits it itself; step two makes the FIFO
# $1/go.<its pid>, reports its pid on the FIFO $1/started, prints a live
# line, and waits for a line on its own FIFO before it ends (an agent
# left running by a killed server never takes another's line).
ctl=$1
turn=$(/bin/cat)
case "$turn" in
*'"node":"one"'*)
	echo one > one.txt
	/usr/bin/git -c user.name=agent -c user.email=agent@example.invalid add one.txt
	/usr/bin/git -c user.name=agent -c user.email=agent@example.invalid commit --quiet -m "step one"
	;;
*'"node":"two"'*)
	echo two > two.txt
	/usr/bin/mkfifo "$ctl/go.$$"
	echo $$ > "$ctl/started"
	echo "two: waiting for the test" >&2
	read -r line < "$ctl/go.$$"
	echo "two: released" >&2
	;;
*'"node":"three"'*)
	echo three > three.txt
	;;
esac
printf '{"session":"fake-%s","text":"null"}\n' "$$"
