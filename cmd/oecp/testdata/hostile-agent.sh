#!/bin/bash
# hostile-agent.sh: a command-driver agent that tries what a hostile agent
# would and reports each attempt as a "PROBE <node> <name> <result>" line
# on stderr. Arguments: the probe directory (ports file "SERVER ALLOWED"),
# the server's data directory, its harness file, a file in its home, and
# the value of a variable only the server's environment holds.
# The instructions pick a mode: "MODE storm" forks until stopped, "MODE
# bigstorm" starts threads past the default process limit (4096) with the
# probe directory's threads program (testdata/threads), "MODE hog" eats
# memory, "MODE fill" writes 64 MiB into its workspace and waits, "MODE
# quiet" only answers, "MODE sleeper" sleeps as oecp-sleeper-<secret>.
probe_dir=$1 data=$2 harness=$3 home_file=$4 secret=$5
req=$(cat)
node=$(printf '%s' "$req" | grep -o '"node":"[a-z]*"' | cut -d'"' -f4)
p() { echo "PROBE $node $1 $2" >&2; }
answer() {
	if [ "$node" = check ]; then
		echo '{"session":"s","text":"{\"output\":null,\"signals\":{\"verdict\":\"ok\"},\"diagnostic\":null}"}'
	else
		echo '{"session":"s","text":"null"}'
	fi
	exit 0
}
case "$req" in
*"MODE storm"*) for i in $(seq 1000); do sleep 600 & done; wait; answer ;;
*"MODE bigstorm"*) "$probe_dir/threads"; exec sleep 600 ;;
*"MODE fill"*) head -c 67108864 /dev/zero >"$PWD/fill" 2>/dev/null; exec sleep 600 ;;
*"MODE hog"*) head -c 2000000000 /dev/zero | tail >/dev/null; answer ;;
*"MODE quiet"*) answer ;;
# The sleeper's arguments carry the secret before it says it started, in
# the process (one PID) that becomes the sleep.
*"MODE sleeper"*) exec -a "oecp-sleeper-$secret" bash -c 'echo "sleeper started" >&2; exec -a "$0" sleep 3600' ;;
esac
read -r server_port allowed_port < "$probe_dir/ports"

if cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -qF "$secret"; then p environ leaked; else p environ hidden; fi
p procs "$(ls -d /proc/[0-9]* | wc -l)"
if cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -q "oecp[ ]serve"; then p server visible; else p server hidden; fi
# Files of the agent's own run directory (workspace, home) do not count.
own=$(dirname "$PWD")
n=0
while IFS= read -r f; do
	case "$f" in "$own"/*) ;; *) n=$((n + 1)) ;; esac
done < <(find "$data" -type f 2>/dev/null)
p datafiles "$n"
p harness "$(cat "$harness" 2>/dev/null | wc -c)"
p homefile "$(cat "$home_file" 2>/dev/null | wc -c)"
# A user namespace of its own does not uncover what the sandbox hides.
p nested "$(unshare -Urm sh -c "umount -l '$(dirname "$harness")' 2>/dev/null; umount -l /tmp 2>/dev/null; cat '$harness'" 2>/dev/null | wc -c)"
others=0
for d in "$PWD"/../../*/workspace; do
	[ -d "$d" ] && ! [ "$d" -ef "$PWD" ] || continue
	others=$((others + 1))
	touch "$d/intruder" 2>/dev/null
done
p otherruns "$others"
if timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$server_port" 2>/dev/null; then p serverport open; else p serverport closed; fi
# The allowed port's server answers "ok" to a greeting.
if timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$allowed_port; echo hello-from-$node >&3; read -r reply <&3; [ \"\$reply\" = ok ]" 2>/dev/null; then p allowedport open; else p allowedport closed; fi
if echo "$node" > "$PWD/written-by-$node" 2>/dev/null; then p write ok; else p write denied; fi
if [ "$node" = work ]; then
	if git init -q && git add -A && git -c user.name=agent -c user.email=agent@example.com commit -qm work; then p git ok; else p git failed; fi
fi
answer
