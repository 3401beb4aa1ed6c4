#!/usr/bin/env bash
# The nightly job cron runs: clean yesterday's crawl, then compute friendships.
#
#   # m h dom mon dow   command
#   30 2 * * *  WEIBO_ETL_HDFS=hdfs://nn:8020 /opt/weibo-etl/jobs/nightly.sh >> /var/log/weibo-etl.log 2>&1
#
# Rerun a failed night by hand with the date:  jobs/nightly.sh 2026-11-29
# Every stage replaces its dt= partitions atomically, so a rerun leaves exactly what one clean
# run leaves. The script stops at the first failing stage and exits with its code (see
# `weibo-etl --help`: 3 = reject budget exceeded, 4 = HDFS unreachable, 5 = HBase unreachable).
set -euo pipefail

DATE="${1:-$(TZ=Asia/Shanghai date -d yesterday +%F)}"
BIN="${WEIBO_ETL_BIN:-weibo-etl}"
RAW="${WEIBO_ETL_RAW:-hdfs:///weibo/raw}"
CLEAN="${WEIBO_ETL_CLEAN:-hdfs:///weibo/clean}"
GRAPH="${WEIBO_ETL_GRAPH:-hdfs:///weibo/graph}"
REPORTS="${WEIBO_ETL_REPORTS:-hdfs:///weibo/reports}"
MAX_REJECT="${WEIBO_ETL_MAX_REJECT_RATIO:-0.05}"

echo "nightly ${DATE}: clean"
"$BIN" --report "${REPORTS}/dt=${DATE}/clean.json" clean \
  --input "${RAW}/dt=${DATE}" --output "$CLEAN" --date "$DATE" --max-reject-ratio "$MAX_REJECT"

echo "nightly ${DATE}: friends"
# Friendships over every follow edge seen so far (all dates), named by this run's date.
"$BIN" --report "${REPORTS}/dt=${DATE}/friends.json" friends \
  --input "${CLEAN}/follows" --output "$GRAPH" --date "$DATE"

echo "nightly ${DATE}: done"
