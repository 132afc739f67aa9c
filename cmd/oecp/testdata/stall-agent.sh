#!/bin/sh
# stall-agent.sh: a stand-in for the codex CLI that starts a turn, reports
# one retry of its provider connection, then writes nothing more, as a CLI
# stuck on a dead connection does (until the server's stall timeout ends
# it). It answers --version as the CLI does.
if [ "${1-}" = --version ]; then echo 'codex-cli 0.0.0 (stall-agent)'; exit 0; fi
cat >/dev/null
echo '{"type":"thread.started","thread_id":"th-stall"}'
echo '{"type":"turn.started"}'
echo '{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}'
exec sleep 600
