#!/usr/bin/env bash
# The bash completion of gprofctl completes commands, per-command options
# and activity lists. bash-completion's helpers are replaced by minimal
# stand-ins, so the test needs only bash.
set -u
compopt() { :; }
_filedir() { COMPREPLY=(); }
_init_completion() {
  words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}
}
complete() { :; }
source "$1"
fails=0
check() { # check "words..." expected-substring
  local line=$1 want=$2
  read -r -a COMP_WORDS <<<"$line"
  [[ $line == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _gprofctl
  if [[ " ${COMPREPLY[*]} " != *" $want "* ]]; then
    echo "FAIL: '$line' completes to '${COMPREPLY[*]}', missing '$want'"; fails=$((fails + 1))
  fi
}
check "gprofctl tr" trace
check "gprofctl rep" report
check "gprofctl report --t" --top
check "gprofctl trace --rep" --report
check "gprofctl trace --rec" --record-shapes
check "gprofctl trace --with-m" --with-modules
check "gprofctl report --gr" --group-by-shape
check "gprofctl --host h1 st" status
check "gprofctl trace --it" --iterations
check "gprofctl trace --it" --iteration-roundup
check "gprofctl trace --activities kernel,me" kernel,memcpy
check "gprofctl help " fetch
check "gprofctl can" cancel
check "gprofctl list --" --job
check "gprofctl list --" --json
check "gprofctl status --j" --json
check "gprofctl tra" traces
check "gprofctl del" delete
check "gprofctl traces --" --older-than
check "gprofctl fetch --" --job
check "gprofctl delete --" --job
if [ "$fails" -eq 0 ]; then echo "1 passed, 0 failed"; else exit 1; fi
