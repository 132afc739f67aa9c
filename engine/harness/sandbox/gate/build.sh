#!/bin/sh
# Builds oecp-gate-amd64 from gate.c (the server embeds the result): one
# static x86-64 executable without libc, a single read-and-execute segment.
set -eu
cd "$(dirname "$0")"
${CC:-gcc} -Os -static -nostdlib -ffreestanding -fno-tree-loop-distribute-patterns -fno-stack-protector -fno-asynchronous-unwind-tables \
	-fno-pie -no-pie -fcf-protection=none -Wall -Werror \
	-Wl,--build-id=none -Wl,-n -Wl,-z,noseparate-code -s \
	-o "${1:-oecp-gate-amd64}" gate.c
