#!/usr/bin/env bash
# gpujoin GPU bundle runner, written by `cargo xtask bundle`. Needs bash, not Rust.
#
#   bash bundle/run.sh [tests|benches|all] [filter]
#   bash bundle/run.sh sanitize [tool...] [filter]   # the test executables under compute-sanitizer
#   bash bundle/run.sh unpack      # only unpack gzipped executables (for ncu, compute-sanitizer...)
#
# Environment:
#   GPUJOIN_REQUIRE_GPU  default 1 here: a GPU test without a device panics instead of skipping
#                        (an already-set value is kept, e.g. GPUJOIN_REQUIRE_GPU=0 on a CPU box;
#                        sanitize always sets 1)
#   OUT                  output folder (default bundle/out): tests.log, bench.log, bench.csv,
#                        sanitize.log, sanitize.md, sanitize-runs/
#   GPUJOIN_TIMEOUT      optional limit in seconds for each executable (needs `timeout`);
#                        sanitize: for each tool and executable, default 600
#   GPUJOIN_ROOT         the repository root the tests run in (default: the bundle's parent)
# Sets GPUJOIN_COMMIT (from bundle/COMMIT) and GPUJOIN_BENCH_CSV=$OUT/bench.csv for the benches,
# and GPUJOIN_BIN_DIR to the bundle's binaries (bin/: `gpujoin`, which gpujoin-cli's tests run;
# `gpujoin-ballista`, which gpujoin-ballista's tests start as scheduler and executors).
#
# Ends with one line `N passed, N failed, N skipped`; exits non-zero when anything failed.
# Tests: libtest counts; a test that printed `SKIPPED <name>: ...` counts as skipped (not passed),
# and libtest's "ignored" counts as skipped. An executable that crashed or timed out without a
# libtest summary counts as one failure. Benches: one count per executable (skipped when it
# printed SKIPPED lines, failed when it exited non-zero).
#
# sanitize: every integration-test executable (`*-test-*`) under each tool: memcheck (with
# --leak-check full), racecheck, synccheck, initcheck (default: all four; tools as separate or
# comma-separated arguments; any other argument is the libtest filter), with
# GPUJOIN_TEST_SIZE=small (reduced test sizes; an already-set value is kept) and
# GPUJOIN_REQUIRE_GPU=1. Writes every run's output to $OUT/sanitize.log (and
# $OUT/sanitize-runs/), a markdown table of each tool's ERROR SUMMARY (and memcheck's LEAK
# SUMMARY) per executable to $OUT/sanitize.md, and ends with one line
# `sanitize: N runs: N clean, N failed`; exits non-zero when a tool reported errors, a test
# failed, or a run ended without the tool's summary (crash, timeout).
#   GPUJOIN_COMPUTE_SANITIZER  the compute-sanitizer to use (default: PATH, $CUDA_HOME/bin,
#                              /usr/local/cuda*/bin, /opt/nvidia/...)
#   GPUJOIN_SANITIZE_JOBS      runs at once on the GPU (default 4; 1 = one after another)
#   GPUJOIN_SANITIZE_ONLY      run only the executables whose file name contains this text
#   GPUJOIN_SANITIZE_FLAGS     extra compute-sanitizer options (split on spaces)
set -uo pipefail

BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="${GPUJOIN_ROOT:-$(dirname "$BUNDLE")}"
what="${1:-all}"
filter="${2:-}"
SANITIZE_TOOLS=(memcheck racecheck synccheck initcheck)
tools=()
usage="usage: bash bundle/run.sh [tests|benches|all|unpack] [filter]
       bash bundle/run.sh sanitize [memcheck|racecheck|synccheck|initcheck|all ...] [filter]"
case "$what" in
  tests|benches|all|unpack) ;;
  sanitize)
    # Tool names (also comma-separated, or `all`) and at most one filter, in any order.
    filter=""
    shift
    for arg in "$@"; do
      list=()
      IFS=',' read -r -a parts <<<"$arg"
      for p in "${parts[@]}"; do
        if [[ "$p" == all ]]; then
          list+=("${SANITIZE_TOOLS[@]}")
        elif [[ " ${SANITIZE_TOOLS[*]} " == *" $p "* ]]; then
          list+=("$p")
        else
          list=(); break
        fi
      done
      if [[ ${#list[@]} -gt 0 ]]; then
        for t in "${list[@]}"; do [[ " ${tools[*]-} " == *" $t "* ]] || tools+=("$t"); done
      elif [[ -z "$filter" ]]; then
        filter="$arg"
      else
        echo "run.sh sanitize: two filters ($filter, $arg): give at most one (tools: ${SANITIZE_TOOLS[*]})" >&2
        echo "$usage" >&2
        exit 2
      fi
    done
    [[ ${#tools[@]} -gt 0 ]] || tools=("${SANITIZE_TOOLS[@]}")
    ;;
  -h|--help|help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$BUNDLE/run.sh"; exit 0 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac

# find_sanitizer: prints the compute-sanitizer to use, or fails.
find_sanitizer() {
  local c
  if [[ -n "${GPUJOIN_COMPUTE_SANITIZER:-}" ]]; then
    [[ -x "$GPUJOIN_COMPUTE_SANITIZER" ]] && { echo "$GPUJOIN_COMPUTE_SANITIZER"; return 0; }
    echo "run.sh sanitize: GPUJOIN_COMPUTE_SANITIZER=$GPUJOIN_COMPUTE_SANITIZER is not an executable" >&2
    return 1
  fi
  c="$(command -v compute-sanitizer 2>/dev/null)" && [[ -x "$c" ]] && { echo "$c"; return 0; }
  for c in ${CUDA_HOME:+"$CUDA_HOME/bin/compute-sanitizer"} ${CUDA_PATH:+"$CUDA_PATH/bin/compute-sanitizer"} \
      /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [[ -x "$c" ]] && { echo "$c"; return 0; }
  done
  # Versioned installs, newest first.
  c="$(ls -d /usr/local/cuda-*/bin/compute-sanitizer /opt/nvidia/hpc_sdk/*/*/cuda/bin/compute-sanitizer \
      /opt/nvidia/hpc_sdk/*/*/cuda/*/bin/compute-sanitizer /opt/nvidia/*/bin/compute-sanitizer \
      /opt/nvidia/compute-sanitizer/compute-sanitizer 2>/dev/null | sort -rV | head -n 1)"
  [[ -n "$c" && -x "$c" ]] && { echo "$c"; return 0; }
  echo "run.sh sanitize: compute-sanitizer not found (GPUJOIN_COMPUTE_SANITIZER, PATH, \$CUDA_HOME/bin, \$CUDA_PATH/bin, /usr/local/cuda*/bin, /opt/nvidia/...); it comes with the CUDA toolkit" >&2
  return 1
}

# has_gpu: an NVIDIA GPU that nvidia-smi lists, or at least a device node.
has_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then return 0; fi
  compgen -G '/dev/nvidia[0-9]*' >/dev/null
}

if [[ "$what" == sanitize ]]; then
  # Before unpacking anything: say plainly what is missing.
  CS="$(find_sanitizer)" || exit 2
  has_gpu || { echo "run.sh sanitize: no NVIDIA GPU here (nvidia-smi lists none and there is no /dev/nvidia0)" >&2; exit 2; }
fi

# Large bundles hold gzipped executables (`cargo xtask bundle` decides). A run unpacks them into
# a temporary folder, removed at exit; `run.sh unpack` unpacks them into bundle/ itself.
exe_dir="$BUNDLE"
tmp="$(mktemp)"
archive="$BUNDLE/executables.tar.xz"
if [[ "$what" != unpack ]] && { [[ -f "$archive" ]] || ls "$BUNDLE"/tests/*.gz "$BUNDLE"/benches/*.gz >/dev/null 2>&1; }; then
  exe_dir="$(mktemp -d)"
  trap 'rm -rf "$tmp" "$exe_dir"' EXIT
else
  trap 'rm -f "$tmp"' EXIT
fi
if [[ -f "$archive" ]]; then
  first="$(head -n1 "$BUNDLE/MANIFEST" | cut -f1,2 | tr '\t' '/')"
  if [[ "$exe_dir" != "$BUNDLE" || ! -x "$BUNDLE/$first" ]]; then
    if command -v xz >/dev/null && command -v tar >/dev/null; then
      xz -dc "$archive" | tar -x -C "$exe_dir" || { echo "run.sh: could not unpack $archive" >&2; exit 2; }
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$archive" "$exe_dir" \
        || { echo "run.sh: could not unpack $archive (no xz, and python3 failed)" >&2; exit 2; }
    fi
  fi
fi
while IFS=$'\t' read -r k file dir <&3; do
  if [[ -f "$BUNDLE/$k/$file.gz" && ! -x "$BUNDLE/$k/$file" ]]; then
    mkdir -p "$exe_dir/$k"
    gzip -dc "$BUNDLE/$k/$file.gz" >"$exe_dir/$k/$file" && chmod +x "$exe_dir/$k/$file" \
      || { echo "run.sh: could not unpack $k/$file.gz" >&2; exit 2; }
  fi
done 3<"$BUNDLE/MANIFEST"
[[ "$what" == unpack ]] && { echo "unpacked into $BUNDLE"; exit 0; }

export GPUJOIN_REQUIRE_GPU="${GPUJOIN_REQUIRE_GPU:-1}"
export GPUJOIN_COMMIT="$(cat "$BUNDLE/COMMIT" 2>/dev/null || echo unknown)"
out="${OUT:-$BUNDLE/out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export GPUJOIN_BENCH_CSV="$out/bench.csv"
# Binaries the tests run (gpujoin-cli's tests run `gpujoin`), carried in bin/ or the archive.
for d in "$exe_dir/bin" "$BUNDLE/bin"; do
  if [[ -z "${GPUJOIN_BIN_DIR:-}" && -d "$d" ]]; then export GPUJOIN_BIN_DIR="$d"; fi
done
# DataFusion's sqllogictest files (gpujoin-datafusion's tests/sqllogictest.rs), carried in the archive.
for d in "$exe_dir/slt/test_files" "$BUNDLE/slt/test_files"; do
  if [[ -z "${GPUJOIN_SLT_DIR:-}" && -d "$d" ]]; then export GPUJOIN_SLT_DIR="$d"; fi
done

if [[ "$what" == sanitize ]]; then
  export GPUJOIN_REQUIRE_GPU=1
  export GPUJOIN_TEST_SIZE="${GPUJOIN_TEST_SIZE:-small}"
  GPUJOIN_TIMEOUT="${GPUJOIN_TIMEOUT:-600}"
fi
timeout_cmd=()
if [[ -n "${GPUJOIN_TIMEOUT:-}" ]]; then
  if command -v timeout >/dev/null; then
    timeout_cmd=(timeout --kill-after=10 "$GPUJOIN_TIMEOUT")
  else
    echo "run.sh: no \`timeout\` here; GPUJOIN_TIMEOUT=$GPUJOIN_TIMEOUT is not applied" >&2
  fi
fi

passed=0 failed=0 skipped=0
summary=()

# The executable and working folder of a MANIFEST entry (run from its package folder, as cargo
# would): sets `exe` and `cwd`.
locate() {
  local kind="$1" file="$2" dir="$3"
  exe="$BUNDLE/$kind/$file"
  cwd="$ROOT/$dir"
  [[ -x "$exe" ]] || exe="$exe_dir/$kind/$file"
  [[ -d "$cwd" ]] || cwd="$ROOT"
}

# run_one KIND FILE PKGDIR LOG: runs one executable from its package folder, as cargo would.
run_one() {
  local kind="$1" file="$2" dir="$3" log="$4" exe cwd rc
  locate "$kind" "$file" "$dir"
  local args=()
  if [[ "$kind" == tests ]]; then
    args=(--show-output)
  else
    args=(--bench)
  fi
  [[ -n "$filter" ]] && args+=("$filter")
  echo "==> $kind/$file ${args[*]}" | tee -a "$log"
  ( cd "$cwd" && CARGO_MANIFEST_DIR="$cwd" "${timeout_cmd[@]}" "$exe" "${args[@]}" ) 2>&1 | tee "$tmp" | tee -a "$log"
  rc=${PIPESTATUS[0]}
  local nskip p=0 f=0 i=0 note=""
  nskip=$(grep -c '^SKIPPED ' "$tmp")
  if [[ "$kind" == tests ]]; then
    local line
    line=$(grep -E '^test result: ' "$tmp" | tail -n 1)
    if [[ -n "$line" ]]; then
      p=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$line")
      f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
      i=$(sed -E 's/.* ([0-9]+) ignored.*/\1/' <<<"$line")
      p=$(( p > nskip ? p - nskip : 0 ))
      i=$(( i + nskip ))
      if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; note=" (exit $rc)"; fi
    elif [[ $rc -eq 0 ]]; then
      if [[ $nskip -gt 0 ]]; then i=$nskip; else p=1; fi
      note=" (no libtest summary)"
    else
      f=1; note=" (exit $rc, no libtest summary)"
    fi
  else
    if [[ $rc -ne 0 ]]; then f=1; note=" (exit $rc)"
    elif [[ $nskip -gt 0 ]]; then i=$nskip
    else p=1; fi
  fi
  [[ $rc -eq 124 && ${#timeout_cmd[@]} -gt 0 ]] && note=" (timed out after ${GPUJOIN_TIMEOUT}s)"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + i))
  summary+=("$(printf '%-8s %-60s %d passed, %d failed, %d skipped%s' "$kind" "$file" "$p" "$f" "$i" "$note")")
}

run_kind() {
  local kind="$1" log="$2" k file dir n=0
  : >"$log"
  while IFS=$'\t' read -r k file dir <&3; do
    [[ "$k" == "$kind" ]] || continue
    run_one "$kind" "$file" "$dir" "$log" </dev/null
    n=$((n + 1))
  done 3<"$BUNDLE/MANIFEST"
  [[ $n -gt 0 ]] || echo "(no $kind executables in this bundle)" | tee -a "$log"
}

# ---- sanitize ---------------------------------------------------------------------------------

# sanitize_one TOOL FILE PKGDIR LOG: one test executable under one tool; its output goes to LOG,
# `<exit status> <seconds>` to LOG.status.
sanitize_one() {
  local tool="$1" file="$2" dir="$3" log="$4" exe cwd rc start=$SECONDS
  locate tests "$file" "$dir"
  local flags=(--tool "$tool")
  [[ "$tool" == memcheck ]] && flags+=(--leak-check full)
  local extra=()
  read -r -a extra <<<"${GPUJOIN_SANITIZE_FLAGS:-}"
  local args=(--show-output)
  [[ -n "$filter" ]] && args+=("$filter")
  {
    echo "==> $tool tests/$file: $CS ${flags[*]} ${extra[*]} <exe> ${args[*]} (GPUJOIN_TEST_SIZE=$GPUJOIN_TEST_SIZE)"
    ( cd "$cwd" && CARGO_MANIFEST_DIR="$cwd" "${timeout_cmd[@]}" "$CS" "${flags[@]}" "${extra[@]}" "$exe" "${args[@]}" ) 2>&1 </dev/null
  } >"$log"
  rc=$?
  echo "$rc $((SECONDS - start))" >"$log.status"
}

# parse_run LOG: sets r_errors (empty: no summary), r_leaks, r_races, r_tests from a run's output.
parse_run() {
  local log="$1" line
  r_errors="" r_leaks="" r_races="" r_tests=""
  line=$(grep -E 'ERROR SUMMARY: *[0-9]+' "$log" | tail -n 1)
  [[ -n "$line" ]] && r_errors=$(sed -E 's/.*ERROR SUMMARY: *([0-9]+).*/\1/' <<<"$line")
  line=$(grep -E 'LEAK SUMMARY:' "$log" | tail -n 1)
  [[ -n "$line" ]] && r_leaks=$(sed -E 's/.*LEAK SUMMARY: *//' <<<"$line")
  line=$(grep -E 'RACECHECK SUMMARY:' "$log" | tail -n 1)
  if [[ -n "$line" ]]; then
    r_races=$(sed -E 's/.*RACECHECK SUMMARY: *//' <<<"$line")
    # Racecheck counts its hazards there: "N hazards displayed (E errors, W warnings)".
    if [[ -z "$r_errors" ]] && grep -qE '\(([0-9]+) errors?' <<<"$line"; then
      r_errors=$(sed -E 's/.*\(([0-9]+) errors?.*/\1/' <<<"$line")
    fi
  fi
  line=$(grep -E '^test result: ' "$log" | tail -n 1)
  [[ -n "$line" ]] && r_tests=$(sed -E 's/^test result: [A-Za-z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 passed, \2 failed/' <<<"$line")
}

# verdict RC SECS: sets v_ok (1/0) and v_text from parse_run's results.
verdict() {
  local rc="$1" secs="$2" what=""
  v_ok=0
  if [[ "$rc" == 124 && ${#timeout_cmd[@]} -gt 0 ]]; then
    what="timed out after ${GPUJOIN_TIMEOUT}s"
  elif [[ -z "$r_errors" ]]; then
    what="no sanitizer summary (exit $rc)"
  elif [[ "$r_errors" -gt 0 ]]; then
    what="$r_errors error$([[ "$r_errors" == 1 ]] || echo s)"
    [[ "$rc" != 0 ]] && what+=", exit $rc"
  elif [[ "$rc" != 0 ]]; then
    what="0 errors, exit $rc"
  else
    v_ok=1
    what="0 errors"
  fi
  [[ -n "$r_leaks" ]] && what+="; leaks: $r_leaks"
  [[ -n "$r_races" && "$r_races" != 0\ hazard* ]] && what+="; racecheck: $r_races"
  [[ -n "$r_tests" ]] && what+="; $r_tests"
  what+="; ${secs}s"
  if [[ $v_ok == 1 ]]; then v_text="ok: $what"; else v_text="**FAIL**: $what"; fi
}

sanitize_all() {
  local runs="$out/sanitize-runs" k file dir tool n=0 started=$SECONDS
  local files=() dirs=()
  rm -rf "$runs"
  mkdir -p "$runs"
  while IFS=$'\t' read -r k file dir <&3; do
    [[ "$k" == tests && "$file" == *-test-* ]] || continue
    [[ -z "${GPUJOIN_SANITIZE_ONLY:-}" || "$file" == *"$GPUJOIN_SANITIZE_ONLY"* ]] || continue
    files+=("$file"); dirs+=("$dir")
  done 3<"$BUNDLE/MANIFEST"
  if [[ ${#files[@]} -eq 0 ]]; then
    echo "run.sh sanitize: no integration-test executables in $BUNDLE/MANIFEST${GPUJOIN_SANITIZE_ONLY:+ matching $GPUJOIN_SANITIZE_ONLY}" >&2
    return 2
  fi
  local jobs="${GPUJOIN_SANITIZE_JOBS:-4}"
  [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || jobs=1
  # `wait -n` (one job at a time) needs bash 4.3.
  if (( BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 3) )); then jobs=1; fi
  local version
  version="$("$CS" --version 2>/dev/null | tail -n 1)"
  echo "compute-sanitizer: $CS ($version); tools: ${tools[*]}; ${#files[@]} executables; $jobs at once; GPUJOIN_TEST_SIZE=$GPUJOIN_TEST_SIZE; limit ${GPUJOIN_TIMEOUT:-none}s per run"
  local i
  # Ctrl-C or a kill stops the runs in flight too.
  trap 'kill $(jobs -p) 2>/dev/null; exit 130' INT TERM
  for tool in "${tools[@]}"; do
    for i in "${!files[@]}"; do
      local log="$runs/$tool-${files[$i]}.log"
      if [[ $jobs -gt 1 ]]; then
        while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n 2>/dev/null || true; done
        { sanitize_one "$tool" "${files[$i]}" "${dirs[$i]}" "$log"; report_one "$tool" "${files[$i]}" "$log"; } &
      else
        sanitize_one "$tool" "${files[$i]}" "${dirs[$i]}" "$log"
        report_one "$tool" "${files[$i]}" "$log"
      fi
      n=$((n + 1))
    done
  done
  wait

  # The log, the table and the verdict, in tool and MANIFEST order.
  local md="$out/sanitize.md" slog="$out/sanitize.log" clean=0 bad=0 rc secs
  local device
  device="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  : >"$slog"
  {
    echo "# compute-sanitizer, commit $GPUJOIN_COMMIT"
    echo
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), ${device:-unknown device}, $CS ($version)"
    echo "- GPUJOIN_TEST_SIZE=$GPUJOIN_TEST_SIZE, GPUJOIN_REQUIRE_GPU=1${filter:+, filter \`$filter\`}, $jobs runs at once, limit ${GPUJOIN_TIMEOUT:-none}s per run, $((SECONDS - started))s in all"
    echo "- memcheck runs with \`--leak-check full\` (leaks count as errors); full output: sanitize.log"
    echo
    local head="| executable |" rule="|---|"
    for tool in "${tools[@]}"; do head+=" $tool |"; rule+="---|"; done
    echo "$head"
    echo "$rule"
  } >"$md"
  local failures=()
  for i in "${!files[@]}"; do
    local row="| ${files[$i]} |"
    for tool in "${tools[@]}"; do
      local log="$runs/$tool-${files[$i]}.log"
      cat "$log" >>"$slog" 2>/dev/null
      read -r rc secs <"$log.status" 2>/dev/null || { rc=255; secs=0; }
      parse_run "$log"
      verdict "$rc" "$secs"
      row+=" ${v_text//|/\\|} |"
      if [[ $v_ok == 1 ]]; then clean=$((clean + 1)); else bad=$((bad + 1)); failures+=("$tool|${files[$i]}|$log"); fi
    done
    echo "$row" >>"$md"
  done
  if [[ ${#failures[@]} -gt 0 ]]; then
    {
      echo
      echo "## Failures"
      local f
      for f in "${failures[@]}"; do
        IFS='|' read -r tool file log <<<"$f"
        echo
        echo "### $tool: $file"
        echo
        echo '```'
        # The tool's reports (not its summaries) and libtest's failures, first 40 lines; else
        # the end of the output.
        local lines
        lines="$(grep -E '^=========  *[^ =]|^test .* FAILED$|panicked at' "$log" | grep -vE 'SUMMARY|COMPUTE-SANITIZER' | head -n 40)"
        if [[ -n "$lines" ]]; then echo "$lines"; else tail -n 15 "$log"; fi
        echo '```'
      done
    } >>"$md"
  fi
  echo
  echo "==> $md"
  cat "$md"
  echo
  echo "sanitize: $n runs (${#tools[@]} tools x ${#files[@]} executables): $clean clean, $bad failed; table in $md, output in $slog"
  [[ $bad -eq 0 ]]
}

# report_one TOOL FILE LOG: one progress line when a run ends.
report_one() {
  local rc secs
  read -r rc secs <"$3.status" 2>/dev/null || { rc=255; secs=0; }
  parse_run "$3"
  verdict "$rc" "$secs"
  printf '%-10s %-52s %s\n' "$1" "$2" "$v_text"
}

echo "gpujoin bundle $GPUJOIN_COMMIT: $what${filter:+ (filter: $filter)}, GPUJOIN_REQUIRE_GPU=$GPUJOIN_REQUIRE_GPU, output in $out"
if [[ "$what" == sanitize ]]; then
  sanitize_all
  exit $?
fi
if [[ "$what" == tests || "$what" == all ]]; then
  run_kind tests "$out/tests.log"
fi
if [[ "$what" == benches || "$what" == all ]]; then
  rm -f "$GPUJOIN_BENCH_CSV"
  run_kind benches "$out/bench.log"
  echo
  echo "==> $GPUJOIN_BENCH_CSV"
  if [[ -s "$GPUJOIN_BENCH_CSV" ]]; then cat "$GPUJOIN_BENCH_CSV"; else echo "(no benchmark rows were written)"; fi
fi

echo
echo "==> summary ($GPUJOIN_COMMIT)"
for s in "${summary[@]}"; do echo "$s"; done
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
