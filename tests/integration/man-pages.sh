#!/usr/bin/env bash
# man-pages.sh NROFF PAGE...: each page renders without groff warnings, and
# the tag of every tagged paragraph (.TP: the one line after it, such as a
# command heading "list [--job ID]") is whole: its brackets and parentheses
# balance. A heading spread over several .B/.I lines puts only its first
# line in the tag and runs the rest into the text ("list [--job" /
# "ID] The traceable..."), which is how gprofctl(1)'s list and launch
# headings broke (issue 26).
set -u
nroff=$1
shift
fails=0
for page in "$@"; do
  warn=$("$nroff" -man -ww -Tutf8 "$page" 2>&1 >/dev/null)
  if [ -n "$warn" ]; then
    echo "FAIL: $page: $warn"; fails=$((fails + 1))
  fi
  while IFS= read -r tag; do
    plain=$(sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' <<<"$tag")
    open=$(tr -cd '[(' <<<"$plain" | wc -c)
    close=$(tr -cd '])' <<<"$plain" | wc -c)
    if [ "$open" -ne "$close" ]; then
      echo "FAIL: $page: heading split over lines: '$tag'"; fails=$((fails + 1))
    fi
  done < <(awk 'tp { print; tp = 0 } /^\.TP/ { tp = 1 }' "$page")
done
if [ "$fails" -eq 0 ]; then echo "1 passed, 0 failed"; else exit 1; fi
