#!/usr/bin/env bash
# Interleaved host rows on the GPU machine, the comparison behind most entries of
# docs/perf-notes.md since session 36:
#
#   scripts/rows.sh "B1 B2 ..." "SHAPE[:MODE] ..." [ROUNDS]
#
# runs `.gpu/host-B --shape S --kernel sm90v2 --mode MODE --iters 50` for every round,
# shape and build in that order (builds interleaved, so a drifting machine moves them
# alike) and prints "build shape mode round: median". MODE is nvfp4 (the default),
# w4a16 or w4a16-bf16. Round 1 verifies (`--verify gpu` for NVFP4, `cpu` otherwise),
# the others do not (`--verify none`). Compare builds within rounds 2 and up: a process
# that has run the naive kernel (round 1's `--verify gpu`), or allocated anything else,
# reads 1-1.5 us slower on 128x7168x16384 whatever the build (docs/perf-notes.md,
# session 38). Builds are binaries built here and copied as .gpu/host-NAME.
# ROWS_TIMEOUT=SECONDS kills a run that takes longer (it prints TIMEOUT): for builds whose
# synchronisation is new, one hang otherwise eats the call (session 39). Unset: no limit.
set -u
cd "$(dirname "$0")/.."
builds=$1 shapes=$2 rounds=${3:-3}
for r in $(seq 1 "$rounds"); do
  for sm in $shapes; do
    s=${sm%%:*} mode=nvfp4
    [ "$sm" != "$s" ] && mode=${sm#*:}
    for b in $builds; do
      v=none
      if [ "$r" = 1 ]; then
        v=gpu
        [ "$mode" != nvfp4 ] && v=cpu
      fi
      out=$(timeout "${ROWS_TIMEOUT:-0}" ./.gpu/host-"$b" --shape "$s" --kernel sm90v2 --mode "$mode" --iters 50 --verify $v)
      [ $? = 124 ] && out=TIMEOUT
      echo "$b $s $mode r$r $(echo "$out" | grep -oE 'median [0-9.]+ us|FAIL|PASS|TIMEOUT' | tr '\n' ' ')"
    done
  done
done
