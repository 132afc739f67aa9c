#!/bin/sh
# A command harness for the web view's browser tests: each agent turn
# prints a numbered line to stderr every 0.2 s until the file "$1"
# exists (the test never creates it for a run it forces), then answers
# null.
PATH=/usr/local/bin:/usr/bin:/bin
read -r _ || true
i=0
while [ ! -e "$1" ]; do
  i=$((i + 1))
  echo "agent line $i" >&2
  sleep 0.2
done
echo '{"session":"s","text":"null"}'
