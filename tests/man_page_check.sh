#!/bin/sh
# capsule(1) renders without a warning: groff -man -ww (all warnings) must print nothing on
# stderr. Without groff this is a SKIP (exit 77) with the reason, never a pass.
# usage: man_page_check.sh MAN_PAGE
page=$1
if ! command -v groff >/dev/null 2>&1; then
  echo "SKIP: groff is not installed, so capsule(1) was not rendered"
  exit 77
fi
[ -s "$page" ] || { echo "FAIL: $page is missing or empty"; exit 1; }
warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
if [ -n "$warnings" ]; then
  echo "FAIL: groff warns about $page:"; echo "$warnings"; exit 1
fi
echo "groff -man -ww: no warnings"
