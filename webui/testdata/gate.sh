#!/bin/sh
# A command worker (and command harness) for the web view's browser tests.
# It reads its input, then prints a numbered line to stderr every 0.2 s
# until the file "$2.go" exists (the test creates it), then answers as $1
# says: "step" echoes its input; "approve" and "reject" answer as a
# verifier with that verdict; "flaky" fails (exit 1) unless "$2.ok"
# exists, else echoes; "agent" reports a turn's usage line, then answers
# an agent turn (one line read) with null.
PATH=/usr/local/bin:/usr/bin:/bin
mode=$1
gate=$2
if [ "$mode" = agent ]; then
  read -r input || true
  echo "usage: input 120 tokens (20 cached), output 30 (5 reasoning), cost 0.012500 USD" >&2
else
  input=$(cat)
fi
name=$(basename "$gate")
i=0
while [ ! -e "$gate.go" ]; do
  i=$((i + 1))
  echo "$name line $i" >&2
  sleep 0.2
done
case $mode in
agent) echo '{"session":"s","text":"null"}' ;;
step) printf '%s\n' "$input" ;;
approve) echo '{"output":null,"signals":{"verdict":"approved"},"diagnostic":null}' ;;
reject) echo '{"output":null,"signals":{"verdict":"rejected"},"diagnostic":null}' ;;
flaky)
  if [ -e "$gate.ok" ]; then
    printf '%s\n' "$input"
  else
    echo "$name failing: no $name.ok" >&2
    exit 1
  fi
  ;;
esac
