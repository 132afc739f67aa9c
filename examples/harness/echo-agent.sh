#!/bin/sh
# echo-agent.sh: a harness for `oecp serve --harness FILE` that runs no
# model, so an agent graph can be tried without any agent CLI. Declare it as
#
#   {"claude": {"driver": "command", "argv": ["/bin/sh", "examples/harness/echo-agent.sh"]}}
#
# Each turn reads {"prompt", "node", "model", "effort", "session"} on stdin
# and answers {"session", "text"} on stdout. The text is bare JSON built
# from the prompt: a step answers its input JSON unchanged (so its output
# type must accept its input), a verifier answers
# {"output": <input>, "signals": {<field>: <first declared label>}, "diagnostic": null}.
# A correction turn carries no input, so it answers with a null input.
# The last "Input JSON:" line is the header: the input and contract are
# one line each after the instructions.
# Needs jq (found through the shell's default PATH when none is passed).
set -eu
echo "echo-agent: answering without a model" >&2
exec jq -c '
  def after($lines; $header):
    ($lines | indices([$header]) | last) as $i
    | if $i == null then null else $lines[$i + 1] end;
  (.prompt | split("\n")) as $lines
  | (after($lines; "Input JSON:") // "null" | fromjson) as $input
  | (after($lines; "Runtime-owned response contract:") // after($lines; "Response contract:") | fromjson) as $contract
  | (if $contract.kind == "verifier"
     then {output: $input, signals: ($contract.signals | map_values(.[0])), diagnostic: null}
     else $input end) as $answer
  | {session: (.session // "echo-agent"), text: ($answer | tojson)}'
