#!/usr/bin/env bash
# Checks the Promela models of latchkey's lock protocols with spin: model/latchkey.pml (the
# reentrant lock's wait queue and hand-over) and model/fair-lock.pml (the fair lock's queue).
#
#   bash model/run.sh ci      small bounds, about 30 seconds on 2 cores
#   bash model/run.sh full    larger bounds, about 5 minutes on 2 cores (up to 8 GB)
#   bash model/run.sh deep    one more configuration too large for `full`
#
# Every configuration is compiled with its own -D switches and searched exhaustively
# (safety, depth-first, no state compression unless listed). A configuration marked `pass`
# must end with 0 errors; one marked `fail:<property>` is a defect demo and must report that
# property as violated, and its counterexample is printed in short.
#
# Needs spin and a C compiler. Environment:
#   JOBS=n          configurations run at once (default: 2)
#   MODEL_OUT=dir   keep pan, trails and logs there (default: a temporary directory that is
#                   removed at exit)
#   SPIN, CC        the spin and C compiler to use
set -uo pipefail

mode=${1:-ci}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SPIN=${SPIN:-spin}
CC=${CC:-gcc}
JOBS=${JOBS:-2}

if [[ -n ${MODEL_OUT:-} ]]; then
  out=$MODEL_OUT
  mkdir -p "$out"
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/latchkey-model.XXXXXX")
  trap 'rm -rf "$out"' EXIT
fi

command -v "$SPIN" >/dev/null || { echo "run.sh: spin not found" >&2; exit 2; }
command -v "$CC" >/dev/null || { echo "run.sh: $CC not found" >&2; exit 2; }

# name | expectation | model switches | extra C flags (a later -O wins: small searches
# compile faster at -O1/-O0) | pan flags | model file (default latchkey.pml)
# The defect demos restore an old protocol step (-DSTALE_GRANT_BUG, -DSTALE_WITHDRAW_BUG).
CI_CHECKS=(
  "waiter-gives-up|pass|-DKB=2 -DMAXF=0 -DMAXD=0 -DMAXG=1||-w24"
  "network-faults|pass|-DMAXF=1 -DMAXD=0 -DMAXG=0|-O1|-w23"
  "subscriber-drops|pass|-DMAXF=0 -DMAXD=1 -DMAXG=0|-O1|-w23"
  "defect-stale-grant|fail:mutual_exclusion|-DSTALE_GRANT_BUG -DMAXF=0 -DMAXD=0 -DMAXG=0 -DNO_BACKED -DNO_STUCK -DNO_WAKEUP|-O0|-w20"
  "defect-stale-withdraw|fail:hold_backed_by_redis|-DSTALE_WITHDRAW_BUG -DKB=2 -DMAXF=0 -DMAXD=0 -DMAXG=1|-O0|-w20"
  "foreign-waiter|pass|-DFOREIGN -DFH=1 -DKF=1 -DMAXF=0 -DMAXD=0 -DMAXG=0|-O1|-w23"
  "defect-no-foreign-turn|fail:foreign_bounded|-DFOREIGN -DFH=1 -DNO_FOREIGN_TURN -DMAXF=0 -DMAXD=0 -DMAXG=0 -DNO_BACKED -DNO_STUCK -DNO_WAKEUP|-O0|-w20"
)
# The fair lock (fair-lock.pml). The defect demos break one protocol step each; the findings
# are behaviours of the scripts as they are, shown as a property that fails (see README.md).
FAIR_CI_CHECKS=(
  "fair-stall-gives-up|pass|-DMAXS=1 -DMAXG=1 -DMAXD=1|-O1|-w23|fair-lock.pml"
  "fair-recheck|pass|-DW=6 -DMAXS=1 -DMAXG=1 -DMAXD=2|-O1|-w23|fair-lock.pml"
  "fair-two-stalls|pass|-DKC=2 -DMAXS=2 -DMAXG=0 -DMAXD=1|-O1|-w23|fair-lock.pml"
  "fair-defect-no-heartbeat|fail:fifo|-DNO_HEARTBEAT|-O0|-w20|fair-lock.pml"
  "fair-defect-no-drop|fail:no_stuck_line|-DNO_STALE_DROP -DNO_WAKEUP|-O0|-w20|fair-lock.pml"
  "fair-defect-leave-keeps|fail:leave_leaves_nothing|-DLEAVE_KEEPS_ENTRY|-O0|-w20|fair-lock.pml"
  "fair-defect-leave-silent|fail:no_lost_wakeup|-DLEAVE_WAKES_NOBODY|-O0|-w20|fair-lock.pml"
  "fair-finding-late-copy|fail:leave_leaves_nothing|-DMAXF=1|-O0|-w20|fair-lock.pml"
  "fair-redisson|pass|-DREDISSON_A -DMAXS=1 -DMAXG=1 -DMAXD=1|-O1|-w23|fair-lock.pml"
  "fair-defect-no-step|fail:fifo|-DNO_STEP_FLOOR -DREDISSON_A -DMAXS=0 -DMAXG=0 -DMAXD=0|-O0|-w20|fair-lock.pml"
)
FAIR_FULL_CHECKS=(
  "fair-faults-two-stalls|pass|-DMAXF=1 -DMAXS=2 -DMAXG=1 -DMAXD=1 -DNO_LEAVE||-w25|fair-lock.pml"
  "fair-recheck-two-each|pass|-DW=6 -DKA=2 -DKB=2 -DMAXS=1 -DMAXG=1 -DMAXD=1||-w24|fair-lock.pml"
  "fair-faults|pass|-DMAXF=1 -DMAXS=1 -DMAXG=1 -DMAXD=1 -DNO_LEAVE||-w24|fair-lock.pml"
  "fair-two-each|pass|-DKA=2 -DKB=2 -DMAXS=1 -DMAXG=1 -DMAXD=1||-w24|fair-lock.pml"
)
# Largest first, so that two at a time end at about the same time.
FULL_CHECKS=(
  "foreign-waiter-2|pass|-DFOREIGN -DMAXF=0 -DMAXD=0 -DMAXG=0|-O1|-w24"
  "gives-up-and-faults|pass|-DKB=2 -DMAXF=1 -DMAXD=0 -DMAXG=1||-w26"
  "all-faults|pass|-DMAXF=1 -DMAXD=1 -DMAXG=1||-w25"
  "two-each-drops|pass|-DKA=2 -DKB=2 -DMAXF=0 -DMAXD=1 -DMAXG=0 -DWAITERS=3||-w25"
  "two-each-gives-up|pass|-DKA=2 -DKB=2 -DMAXF=0 -DMAXD=0 -DMAXG=1 -DWAITERS=3||-w24"
  "defect-stale-withdraw-2|fail:mutual_exclusion|-DSTALE_WITHDRAW_BUG -DKA=2 -DKB=2 -DMAXF=0 -DMAXD=0 -DMAXG=1 -DNO_BACKED -DNO_STUCK -DNO_WAKEUP||-w23"
)
# Not in `full` (about 3.5 minutes and 8 GB on its own): bash model/run.sh deep
DEEP_CHECKS=(
  "two-each-faults|pass|-DKA=2 -DKB=2 -DMAXF=1 -DMAXD=0 -DMAXG=0 -DWAITERS=3||-w26"
)

case $mode in
  ci) checks=("${CI_CHECKS[@]}" "${FAIR_CI_CHECKS[@]}") ;;
  full) checks=("${FULL_CHECKS[@]}" "${FAIR_FULL_CHECKS[@]}" "${CI_CHECKS[@]}" "${FAIR_CI_CHECKS[@]}") ;;
  deep) checks=("${DEEP_CHECKS[@]}") ;;
  *) echo "usage: bash model/run.sh [ci|full|deep]" >&2; exit 2 ;;
esac

# Runs one configuration in $out/<name>; writes its summary line to $out/<name>/result and
# its status (ok / FAILED) to $out/<name>/status.
check() {
  local name=$1 expect=$2 defines=$3 ccflags=$4 panflags=$5 pml=${6:-latchkey.pml}
  local dir=$out/$name
  rm -rf "$dir"; mkdir -p "$dir"; cp "$here/$pml" "$dir/"
  local start=$SECONDS status=FAILED summary
  (
    cd "$dir" || exit 1
    # shellcheck disable=SC2086
    "$SPIN" $defines -a "$pml" >spin.log 2>&1 || exit 3
    # shellcheck disable=SC2086
    "$CC" -O2 -DSAFETY $ccflags -o pan pan.c >cc.log 2>&1 || exit 4
    # shellcheck disable=SC2086
    ./pan -m1000000 -c1 $panflags >pan.log 2>&1
    exit 0
  )
  local rc=$?
  local secs=$((SECONDS - start))
  local log=$dir/pan.log
  if ((rc != 0)); then
    summary="could not build (see $( ((rc == 3)) && echo spin.log || echo cc.log))"
  else
    local errors states depth violated
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$log" | tail -1)
    states=$(awk '/states, stored/ {print $1; exit}' "$log")
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$log" | tail -1)
    violated=$(sed -n 's/.*assertion violated \([a-z_]*\).*/\1/p' "$log" | head -1)
    if grep -q 'max search depth too small' "$log"; then
      summary="search depth too small: incomplete"
    elif grep -qE 'out of memory|not enough memory' "$log"; then
      summary="out of memory: incomplete"
    elif [[ $expect == pass ]]; then
      if [[ $errors == 0 ]]; then
        status=ok
        summary="all properties hold: ${states} states stored, depth ${depth}, errors 0"
      else
        summary="VIOLATED ${violated:-?} (errors ${errors:-?}; trail kept in $dir if MODEL_OUT is set)"
      fi
    else
      local want=${expect#fail:}
      if [[ ${errors:-0} != 0 && $violated == "$want" ]]; then
        status=ok
        summary="defect found as expected: ${violated} violated (${states} states, trail depth $(sed -n 's/.*(at depth \([0-9]*\)).*/\1/p' "$log" | head -1))"
        (cd "$dir" && "$SPIN" -t $defines "$pml" 2>/dev/null |
          sed -n 's/^ *@ //p' >trail.txt)
      elif [[ ${errors:-0} != 0 ]]; then
        summary="expected ${want}, but ${violated:-?} was violated"
      else
        summary="expected ${want} to be violated, but every property held (${states} states)"
      fi
    fi
  fi
  printf '%-8s %-24s %4ss  %s\n' "$([[ $status == ok ]] && echo PASS || echo FAIL)" "$name" "$secs" "$summary" \
    >"$dir/result"
  echo "$status" >"$dir/status"
}

echo "latchkey model: $mode ($(${SPIN} -V | head -1)), $JOBS at a time"
names=()
for spec in "${checks[@]}"; do
  IFS='|' read -r name expect defines ccflags panflags pml <<<"$spec"
  names+=("$name")
  while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
  check "$name" "$expect" "$defines" "$ccflags" "$panflags" "$pml" &
done
wait

failed=0
for name in "${names[@]}"; do
  cat "$out/$name/result"
  if [[ -f $out/$name/trail.txt ]]; then
    sed 's/^/           | /' "$out/$name/trail.txt"
  fi
  [[ $(cat "$out/$name/status") == ok ]] || failed=1
done
if ((failed)); then
  echo "latchkey model: FAILED"
  exit 1
fi
echo "latchkey model: all $mode checks behaved as expected"
