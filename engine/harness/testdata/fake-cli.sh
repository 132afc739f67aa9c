#!/bin/sh
# fake-cli.sh stands in for the codex and claude CLIs in tests; a test
# copies it to bin/<CLI name> in its state directory. Turn N (counted
# from 0 in ./count) records its argv (one item a line) in calls/N.argv,
# its environment in calls/N.env, its stdin in calls/N.stdin and its
# working directory in calls/N.cwd; runs actions/N, a shell fragment that
# may edit files, hang or fail, when there is one; prints events/N, the
# CLI's own event stream; and exits with the status in exits/N (default 0).
d=$(dirname "$(dirname "$0")")
n=$(cat "$d/count")
echo $((n + 1)) > "$d/count"
for a in "$@"; do printf '%s\n' "$a"; done > "$d/calls/$n.argv"
env > "$d/calls/$n.env"
pwd > "$d/calls/$n.cwd"
cat > "$d/calls/$n.stdin"
if [ -f "$d/actions/$n" ]; then . "$d/actions/$n"; fi
cat "$d/events/$n" 2>/dev/null
exit $(cat "$d/exits/$n" 2>/dev/null || echo 0)
