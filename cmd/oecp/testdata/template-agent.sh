#!/bin/sh
# template-agent.sh: a stand-in for the codex and claude CLIs (installed
# under either name; the name picks the CLI it imitates: its arguments and
# its event stream, as examples/agents/bin/agent does) that plays the
# agents of the built-in templates without a model. The instructions in
# the prompt say which agent it is:
#   implementer, single worker: writes CHANGE.md (revision 1) and keeps its
#     whole prompt in PROMPT.txt;
#   repairer: appends the next revision to CHANGE.md;
#   acceptance reviewer: accepts;
#   code reviewer: rejects CHANGE.md until it holds two revisions.
# Each answers in the template's contract.
set -eu
cli=$(basename "$0")
session=''
if [ "$cli" = codex ]; then
	prompt=$(cat)
	prev='' resumed=false
	for a in "$@"; do
		if [ "$a" = resume ]; then resumed=true; fi
		if [ "$a" = - ]; then break; fi
		prev=$a
	done
	if $resumed; then session=$prev; fi
else
	while [ $# -gt 1 ]; do
		if [ "$1" = --resume ]; then session=$2; fi
		shift
	done
	prompt=$1
fi
if [ -z "$session" ]; then session="fake-$cli-$(date +%s)-$$"; fi

revisions=$(grep -c '^- revision' CHANGE.md 2>/dev/null || true)
revisions=${revisions:-0}
case "$prompt" in
*'acceptance reviewer'*)
	text="Acceptance review: accepted."
	answer='{"output":null,"signals":{"verdict":"accepted"},"diagnostic":{"message":"Accepted: CHANGE.md is there."}}' ;;
*'code reviewer'*)
	if [ "$revisions" -ge 2 ]; then verdict=accepted message="Accepted: tested."
	else verdict=rejected message="Rejected: CHANGE.md has $revisions revision, add a test."; fi
	text="Code review: $verdict."
	answer='{"output":null,"signals":{"verdict":"'$verdict'"},"diagnostic":{"message":"'"$message"'"}}' ;;
*'You are repairing'*)
	n=$((revisions + 1))
	echo "- revision $n" >> CHANGE.md
	text="Repaired: CHANGE.md revision $n."
	answer='{"summary":"CHANGE.md revision '$n'"}' ;;
*)
	echo "- revision 1" > CHANGE.md
	printf '%s\n' "$prompt" > PROMPT.txt
	text="Implemented: CHANGE.md revision 1."
	answer='{"summary":"CHANGE.md revision 1"}' ;;
esac
quoted=$(printf '%s' "$answer" | sed 's/\\/\\\\/g; s/"/\\"/g')

# say prints one event line as it is (echo would expand backslashes).
say() { printf '%s\n' "$1"; }

if [ "$cli" = codex ]; then
	say '{"type":"thread.started","thread_id":"'"$session"'"}'
	say '{"type":"turn.started"}'
	say '{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"'"$text"'"}}'
	say '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"'"$quoted"'"}}'
	say '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'
else
	sid='"session_id":"'"$session"'"'
	say '{"type":"system","subtype":"init","model":"fake",'"$sid"'}'
	say '{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"'"$text"'\n"}},'"$sid"'}'
	say '{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"'"$quoted"'"}},'"$sid"'}'
	say '{"type":"result","subtype":"success","is_error":false,"result":"'"$quoted"'",'"$sid"'}'
fi
