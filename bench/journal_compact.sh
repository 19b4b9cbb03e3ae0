#!/bin/sh
# 8 clients, 60,000 1000-byte SETs over 10,000 keys, --fsync always: the
# journal grows past 4x the 10 MB live data and is compacted.
B=${FCCL_BIN:-build/bin}
D=$(mktemp -d /tmp/fccl-cbench-XXXXXX)
$B/tcpstore-server --host 127.0.0.1 --port 0 --journal $D/j --fsync always >$D/out 2>$D/err &
SP=$!
i=0; while ! grep -q listening $D/out && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
PORT=$(sed 's/.*://' $D/out)
timeout 240 $B/tcpstore-bench --addr 127.0.0.1:$PORT -c 8 -t set -d 1000 -n 60000 -r 1250 | grep -v '^csv'
sleep 1.5   # the sweep finishes a background compaction
$B/tcpstore --addr 127.0.0.1:$PORT stats | grep -E 'loop_turn|journal_'
grep -E 'compact' $D/err
kill $SP; wait $SP
rm -rf $D
