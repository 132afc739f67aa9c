#!/bin/sh
# provider-agent.sh MODE AGENT [codex arguments...]: a stand-in for the
# codex CLI whose reviewers cannot reach their model: the implementer and
# repairer are AGENT (template-agent.sh installed as codex), each reviewer
# fails as the CLI does when its provider
#   401:         refuses the key (the CLI would retry it for minutes);
#   unreachable: cannot be reached: five reconnects, then the turn fails;
#   silent:      cannot be reached and the CLI stays silent while it
#                retries (the server's stall timeout ends it).
# It answers --version as the CLI does.
if [ "${1-}" = --version ]; then echo 'codex-cli 0.0.0 (provider-agent)'; exit 0; fi
mode=$1 agent=$2
shift 2
prompt=$(cat)
# A reviewer, or the continuation of a reviewer's failed turn (its
# session), fails; everything else is the agent's.
case "$prompt $* " in
*'acceptance reviewer'* | *'code reviewer'* | *' th-provider '*) ;;
*) printf '%s' "$prompt" | "$agent" "$@"; exit ;;
esac
url='http://127.0.0.1:9/v1/responses'
echo '{"type":"thread.started","thread_id":"th-provider"}'
echo '{"type":"turn.started"}'
case "$mode" in
401)
	echo '{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: Incorrect API key provided)"}'
	exec sleep 600 ;;
unreachable)
	for i in 1 2 3 4 5; do
		echo '{"type":"error","message":"Reconnecting... '$i'/5 (error sending request for url ('$url'))"}'
	done
	echo '{"type":"turn.failed","error":{"message":"stream disconnected before completion: error sending request for url ('$url')"}}'
	exit 1 ;;
silent)
	exec sleep 600 ;;
esac
