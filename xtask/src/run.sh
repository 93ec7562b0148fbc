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
#                        sanitize.log, sanitize.md, sanitize-times.tsv, sanitize-runs/
#   GPUJOIN_TIMEOUT      optional limit in seconds for each executable (needs `timeout`);
#                        sanitize: for each job (one tool, one test), default 240
#   GPUJOIN_ROOT         the repository root the tests run in (default: the bundle's parent)
#   GPUJOIN_LANES        tests only: run N test executables at once, lane i on GPU i of those
#                        visible (CUDA_VISIBLE_DEVICES, else nvidia-smi -L; more lanes than GPUs
#                        share them in turn); default 1 (one after another). Needs `flock`.
#   GPUJOIN_ALL_GPUS     with lanes: executables whose name matches this regex (default
#                        multi_gpu) run afterwards, one at a time, with every GPU visible
#   GPUJOIN_NCCL_LIB     a folder holding libnccl.so.2 (default: python3's nvidia-nccl-cu13 wheel);
#                        linked as $TMPDIR/gpujoin-nccl-lib/libnccl.so onto LD_LIBRARY_PATH;
#                        NCCL_NVLS_ENABLE=0 always
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
# sanitize: every test of every integration-test executable (`*-test-*`; listed with
# `<exe> --list --format terse [filter]`) under each tool: memcheck (with --leak-check full),
# racecheck, synccheck, initcheck (default: all four; tools as separate or comma-separated
# arguments; any other argument is the libtest filter), with GPUJOIN_TEST_SIZE=small (reduced test
# sizes; an already-set value is kept), GPUJOIN_REQUIRE_GPU=1 and --show-backtrace device. Each
# (tool, executable, test) is one job, one compute-sanitizer process
# (`<exe> --exact <test> --test-threads=1`; an executable listing no tests, a custom harness, runs
# whole as one job), GPUJOIN_SANITIZE_JOBS at once, the slowest first: by the seconds of an
# earlier run's sanitize-times.tsv, else racecheck, initcheck, memcheck, synccheck and the
# executables with most tests first. A job over GPUJOIN_TIMEOUT is killed and reported `timed out`.
# Writes every job's output to $OUT/sanitize-runs/<tool>/<exe>/<n>.log (all of them in
# $OUT/sanitize.log), every job's `tool exe test seconds status` to $OUT/sanitize-times.tsv
# (status: clean, errors N, timed out, failed), and $OUT/sanitize.md: the summary line, a table
# per tool and one per executable x tool (errors, memcheck's leaks, tests, seconds, the slowest
# test), the jobs that were not clean, each tool's first reports de-duplicated by kernel (with
# the tests they came from and the device backtrace), the end of each failed or timed-out job's
# output, and the slowest jobs. Ends with one line `sanitize: N jobs (...): N clean, N with
# errors, N timed out, N failed; wall Ns ...`; exits non-zero when a tool reported errors, a job
# timed out, a test failed, or a job ended without the tool's summary (crash).
#   GPUJOIN_COMPUTE_SANITIZER  the compute-sanitizer to use (default: PATH, $CUDA_HOME/bin,
#                              /usr/local/cuda*/bin, /opt/nvidia/...)
#   GPUJOIN_SANITIZE_JOBS      jobs at once on the GPU (default: `nproc`; 1 = one after another)
#   GPUJOIN_SANITIZE_ONLY      run only the executables whose file name contains this text
#   GPUJOIN_SANITIZE_FLAGS     extra compute-sanitizer options (split on spaces)
#   GPUJOIN_SANITIZE_BACKTRACE --show-backtrace value (default `device`; `yes` adds the host frames,
#                              which name the Rust caller of a CUB kernel where the executables
#                              keep their symbols: `cargo xtask sanitize`, not the stripped bundle)
#   GPUJOIN_RACECHECK_LAUNCHES racecheck checks the first N kernel launches of each test only
#                              (--launch-count N; unset: all)
#   GPUJOIN_SANITIZE_DEADLINE  seconds after which no further job starts (the rest are reported
#                              `not started`, and the run fails); the jobs running finish
#   GPUJOIN_SANITIZE_TIMES     a `tool exe test seconds status` TSV (a sanitize-times.tsv) to order
#                              the jobs by (default: $OUT/sanitize-times.tsv when it exists;
#                              `none`: the default order)
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

# NCCL for the multi-GPU joins (gpujoin-multi-gpu): cudarc loads `libnccl.so`, the
# nvidia-nccl-cu13 wheel ships `libnccl.so.2`; link it under that name from the wheel python3
# has (or GPUJOIN_NCCL_LIB, a folder holding libnccl.so.2) and put the link on LD_LIBRARY_PATH.
# NVLink multicast stays off in every run.
export NCCL_NVLS_ENABLE=0
nccl_dir="${GPUJOIN_NCCL_LIB:-}"
if [[ -z "$nccl_dir" ]] && command -v python3 >/dev/null; then
  nccl_dir="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)"
fi
if [[ -n "$nccl_dir" && -f "$nccl_dir/libnccl.so.2" ]]; then
  nccl_link="${TMPDIR:-/tmp}/gpujoin-nccl-lib"
  mkdir -p "$nccl_link"
  ln -sf "$nccl_dir/libnccl.so.2" "$nccl_link/libnccl.so"
  export LD_LIBRARY_PATH="$nccl_link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

if [[ "$what" == sanitize ]]; then
  export GPUJOIN_REQUIRE_GPU=1
  export GPUJOIN_TEST_SIZE="${GPUJOIN_TEST_SIZE:-small}"
  # Each job is a process of its own: load only the kernels it launches.
  export CUDA_MODULE_LOADING="${CUDA_MODULE_LOADING:-LAZY}"
  GPUJOIN_TIMEOUT="${GPUJOIN_TIMEOUT:-240}"
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

# run_lanes LOG: the test executables GPUJOIN_LANES at a time (see the header), each lane taking
# the next executable of the MANIFEST until none is left; their outputs go to LOG (and stdout) in
# MANIFEST order once all have finished, then the GPUJOIN_ALL_GPUS ones run as run_kind would.
run_lanes() {
  local log="$1" lanes="$GPUJOIN_LANES" k file dir i line p f s rest
  local gpus=() queue=() alone=() all_re="${GPUJOIN_ALL_GPUS-multi_gpu}" lanedir
  if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
    IFS=',' read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
  else
    mapfile -t gpus < <(nvidia-smi -L 2>/dev/null | sed -nE 's/^GPU ([0-9]+):.*/\1/p')
  fi
  [[ ${#gpus[@]} -gt 0 ]] || gpus=(0)
  while IFS=$'\t' read -r k file dir <&3; do
    [[ "$k" == tests ]] || continue
    if [[ -n "$all_re" && "$file" =~ $all_re ]]; then alone+=("$file"$'\t'"$dir"); else queue+=("$file"$'\t'"$dir"); fi
  done 3<"$BUNDLE/MANIFEST"
  lanedir="$(mktemp -d)"
  echo 0 >"$lanedir/next"
  echo "run.sh: ${#queue[@]} test executables in $lanes lanes on GPUs ${gpus[*]}; then ${#alone[@]} with every GPU"
  : >"$log"
  lane() {
    local l="$1" idx ln
    while :; do
      idx=$(flock "$lanedir/next" bash -c 'n=$(cat "$0"); echo $((n + 1)) >"$0"; echo "$n"' "$lanedir/next")
      [[ $idx -lt ${#queue[@]} ]] || break
      ln="${queue[$idx]}"
      (
        tmp="$(mktemp)"; passed=0; failed=0; skipped=0; summary=()
        export CUDA_VISIBLE_DEVICES="${gpus[$((l % ${#gpus[@]}))]}"
        run_one tests "${ln%%$'\t'*}" "${ln#*$'\t'}" "$lanedir/$idx.log" >/dev/null
        echo "$passed $failed $skipped ${summary[0]}" >"$lanedir/$idx.result"
        rm -f "$tmp"
      ) </dev/null
    done
  }
  for ((i = 0; i < lanes; i++)); do lane "$i" & done
  wait
  for ((i = 0; i < ${#queue[@]}; i++)); do
    cat "$lanedir/$i.log" 2>/dev/null | tee -a "$log"
    line="${queue[$i]}"
    if read -r p f s rest <"$lanedir/$i.result" 2>/dev/null; then
      passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s)); summary+=("$rest")
    else
      failed=$((failed + 1)); summary+=("$(printf '%-8s %-60s lane ended without a result' tests "${line%%$'\t'*}")")
    fi
  done
  rm -rf "$lanedir"
  for line in "${alone[@]}"; do
    run_one tests "${line%%$'\t'*}" "${line#*$'\t'}" "$log" </dev/null
  done
}

# ---- sanitize ---------------------------------------------------------------------------------
#
# One job is one (tool, executable, test): `compute-sanitizer --tool T <exe> --exact <test>
# --test-threads=1`, GPUJOIN_SANITIZE_JOBS of them at once, the slowest first. Under $out:
#   sanitize-runs/<tool>/<exe>/<n>.log   one job's output (.status: `<exit status> <seconds>`,
#                                        .result: the job's line for the tables)
#   sanitize-times.tsv                   every job: tool, exe, test, seconds, status
#   sanitize.md, sanitize.log            the tables and first reports; every job's output

# job_status LOG RC: sets j_status (`clean`, `errors N`, `timed out`, `failed`), j_errors, j_leaks
# (bytes; empty when the tool printed no leak summary) and j_note (why a job failed).
job_status() {
  local log="$1" rc="$2" line errors=""
  j_errors=0 j_leaks="" j_note=""
  line=$(grep -E 'ERROR SUMMARY: *[0-9]+' "$log" | tail -n 1)
  [[ -n "$line" ]] && errors=$(sed -E 's/.*ERROR SUMMARY: *([0-9]+).*/\1/' <<<"$line")
  line=$(grep -E 'RACECHECK SUMMARY:' "$log" | tail -n 1)
  if [[ -z "$errors" && -n "$line" ]]; then
    # Racecheck counts its hazards there: "N hazards displayed (E errors, W warnings)".
    errors=0
    grep -qE '\(([0-9]+) errors?' <<<"$line" && errors=$(sed -E 's/.*\(([0-9]+) errors?.*/\1/' <<<"$line")
  fi
  line=$(grep -E 'LEAK SUMMARY:' "$log" | tail -n 1)
  [[ -n "$line" ]] && j_leaks=$(sed -nE 's/.*LEAK SUMMARY: *([0-9]+) bytes.*/\1/p' <<<"$line")
  local result
  result=$(grep -E '^test result: ' "$log" | tail -n 1)
  if [[ ( "$rc" == 124 || "$rc" == 137 ) && ${#timeout_cmd[@]} -gt 0 ]]; then
    j_status="timed out"; j_note="over ${GPUJOIN_TIMEOUT}s"
    [[ -n "$errors" && "$errors" -gt 0 ]] && { j_errors=$errors; j_note+=", $errors errors before"; }
  elif [[ -n "$errors" && "$errors" -gt 0 ]]; then
    j_status="errors $errors"; j_errors=$errors
    [[ "$rc" != 0 ]] && j_note="exit $rc"
  elif [[ -z "$errors" && -n "$result" && "$result" == *" 0 failed"* ]] && grep -q 'terminated before first instrumented API call' "$log"; then
    # A test that makes no CUDA call (a host-side check in a GPU test executable): nothing to
    # sanitize, and its test passed.
    j_status="clean"; j_note="no CUDA call"
  elif [[ -z "$errors" ]]; then
    j_status="failed"; j_note="no sanitizer summary, exit $rc"
  elif [[ "$rc" != 0 ]]; then
    j_status="failed"; j_note="exit $rc"
  elif [[ -n "$result" && "$result" != *" 0 failed"* ]]; then
    j_status="failed"; j_note="$result"
  else
    j_status="clean"
  fi
  [[ "$j_status" == failed && "$result" == *" 0 failed"* ]] && j_note+="; tests: ok" || true
}

# sanitize_job SEQ N TOTAL TOOL IDX TEST: test TEST of executable IDX under TOOL (TEST `*`: the
# whole executable, for one that lists no libtest tests). Writes the log, .status and .result.
sanitize_job() {
  local seq="$1" n="$2" total="$3" tool="$4" i="$5" test="$6" exe cwd rc start=$SECONDS
  local file="${files[$i]}"
  local log="$runs/$tool/$file/$seq.log"
  locate tests "$file" "${dirs[$i]}"
  local flags=(--tool "$tool" --show-backtrace "${GPUJOIN_SANITIZE_BACKTRACE:-device}")
  [[ "$tool" == memcheck ]] && flags+=(--leak-check full)
  # racecheck instruments every shared-memory access (100-1000x slower kernels): with
  # GPUJOIN_RACECHECK_LAUNCHES=N it checks the first N kernel launches of each test (the first
  # property case's kernels, each algorithm's phases), the rest run unchecked.
  [[ "$tool" == racecheck && -n "${GPUJOIN_RACECHECK_LAUNCHES:-}" ]] && flags+=(--launch-count "$GPUJOIN_RACECHECK_LAUNCHES")
  local extra=()
  read -r -a extra <<<"${GPUJOIN_SANITIZE_FLAGS:-}"
  local args=(--exact "$test" --test-threads=1 --show-output)
  [[ "$test" == '*' ]] && { args=(--show-output); [[ -n "$filter" ]] && args+=("$filter"); }
  {
    echo "==> $tool tests/$file $test: $CS ${flags[*]} ${extra[*]} <exe> ${args[*]} (GPUJOIN_TEST_SIZE=$GPUJOIN_TEST_SIZE)"
    ( cd "$cwd" && CARGO_MANIFEST_DIR="$cwd" "${timeout_cmd[@]}" "$CS" "${flags[@]}" "${extra[@]}" "$exe" "${args[@]}" ) 2>&1 </dev/null
  } >"$log"
  rc=$?
  local secs=$((SECONDS - start))
  echo "$rc $secs" >"$log.status"
  job_status "$log" "$rc"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$seq" "$tool" "$file" "$test" "$secs" "$j_status" "${j_leaks:--}" "${j_note:--}" "$log" >"$log.result"
  printf '[%d/%d] %-9s %-40s %-56s %s%s (%ss)\n' "$n" "$total" "$tool" "$file" "$test" "$j_status" "${j_note:+ ($j_note)}" "$secs"
}

# list_tests IDX: the executable's tests (libtest `--list --format terse`, narrowed by the
# filter; `#[ignore]`d ones left out, as a plain run leaves them), one a line; fails when the
# listing fails.
list_tests() {
  local exe cwd base="$runs/list-${files[$1]}"
  locate tests "${files[$1]}" "${dirs[$1]}"
  local args=(--list --format terse)
  [[ -n "$filter" ]] && args+=("$filter")
  ( cd "$cwd" && CARGO_MANIFEST_DIR="$cwd" "${timeout_cmd[@]}" "$exe" "${args[@]}" ) 2>"$base.err" </dev/null >"$base.out"
  local rc=$?
  ( cd "$cwd" && CARGO_MANIFEST_DIR="$cwd" "${timeout_cmd[@]}" "$exe" "${args[@]}" --ignored ) 2>/dev/null </dev/null | sed -n 's/: test$//p' >"$base.ignored"
  sed -n 's/: test$//p' "$base.out" | grep -vxF -f "$base.ignored"
  return $rc
}

# order_jobs TIMES: reads `seq tool idx file test default_key` lines, prints `seq tool idx test` the
# slowest first. With a times file (`tool exe test seconds status`, an earlier
# sanitize-times.tsv): by its seconds (a job it lists as not started counts as lacking); a job it lacks gets the mean of its tool and executable,
# else of its tool, or (neither known) the slowest time + 1 (new tests run early). Else (and on ties): racecheck,
# initcheck, memcheck, synccheck, and the executables with most tests first.
order_jobs() {
  awk -v times="$1" 'BEGIN {
      FS = OFS = "\t"; have = 0; max = 0
      if (times != "") while ((getline line < times) > 0) {
        split(line, f, "\t")
        if (f[4] !~ /^[0-9]+(\.[0-9]+)?$/ || f[5] ~ /^not started/) continue
        t[f[1] FS f[2] FS f[3]] = f[4]; s[f[1] FS f[2]] += f[4]; c[f[1] FS f[2]]++; ts[f[1]] += f[4]; tc[f[1]]++
        if (f[4] + 0 > max) max = f[4] + 0
        have = 1
      }
    }
    {
      k = $2 FS $4 FS $5; p = $2 FS $4
      if (!have) est = 0
      else if (k in t) est = t[k]
      else if (p in c) est = s[p] / c[p]
      else if ($2 in tc) est = ts[$2] / tc[$2]
      else est = max + 1
      print est, $6, $1, $2, $3, $5
    }' | sort -t $'\t' -k1,1gr -k2,2gr -k3,3n | cut -f3-
}

# sanitize_tables RESULTS: the per-tool and per-executable tables (markdown) from the jobs'
# .result lines (`seq tool exe test seconds status leaks note log`; `-`: no leak summary, no
# note; never an empty field, which `read` would merge with the next).
sanitize_tables() {
  awk -v tools="${tools[*]}" -v files="${files[*]}" '
    function many(n, word) { return n " " word (n == 1 ? "" : "s") }
    BEGIN { FS = "\t"; nt = split(tools, T, " "); nf = split(files, F, " ") }
    {
      tool = $2; file = $3; test = $4; secs = $5 + 0; st = $6; leaks = $7; k = file SUBSEP tool
      jobs[k]++; tjobs[tool]++; tsecs[tool] += secs; secsum[k] += secs
      if (!(k in slow) || secs > slow[k]) { slow[k] = secs; slowt[k] = test }
      if (leaks != "-") { hasleak[k] = 1; leak[k] += leaks; thasleak[tool] = 1; tleak[tool] += leaks }
      if (st == "clean") tclean[tool]++
      else if (st ~ /^errors /) { n = substr(st, 8) + 0; err[k] += n; errt[k]++; terr[tool] += n; terrt[tool]++ }
      else if (st == "timed out") { tmo[k]++; ttmo[tool]++ }
      else { fail[k]++; tfail[tool]++ }
    }
    END {
      print "| tool | jobs | clean | errors (jobs) | leaked bytes | timed out | failed | job seconds |"
      print "|---|---|---|---|---|---|---|---|"
      for (j = 1; j <= nt; j++) {
        t = T[j]
        printf "| %s | %d | %d | %s | %s | %s | %s | %d |\n", t, tjobs[t], tclean[t], \
          (terr[t] ? "**" terr[t] "** (" terrt[t] ")" : "0"), (thasleak[t] ? (tleak[t] ? "**" tleak[t] "**" : "0") : "-"), \
          (ttmo[t] ? "**" ttmo[t] "**" : "0"), (tfail[t] ? "**" tfail[t] "**" : "0"), tsecs[t]
      }
      print ""
      head = "| executable |"; rule = "|---|"
      for (j = 1; j <= nt; j++) { head = head " " T[j] " |"; rule = rule "---|" }
      print head; print rule
      for (i = 1; i <= nf; i++) {
        row = "| " F[i] " |"
        for (j = 1; j <= nt; j++) {
          k = F[i] SUBSEP T[j]
          if (!(k in jobs)) { row = row " no tests |"; continue }
          cell = err[k] ? "**" many(err[k], "error") "** (" many(errt[k], "test") ")" : "0 errors"
          if (k in hasleak) cell = cell ", " (leak[k] ? "**" leak[k] " bytes leaked**" : "0 leaks")
          if (tmo[k]) cell = cell ", **" tmo[k] " timed out**"
          if (fail[k]) cell = cell ", **" fail[k] " failed**"
          cell = cell "; " many(jobs[k], "test") ", " secsum[k] " s; slowest `" slowt[k] "` " slow[k] " s"
          gsub(/\|/, "\\|", cell)
          row = row " " cell " |"
        }
        print row
      }
    }' "$1"
}

# first_reports TOOL RESULTS: TOOL's reports in the jobs with errors, de-duplicated by kernel (the
# last `Device Frame`, the outermost function, else the function the report is `at`; its name
# without template arguments and parameters): how many, in which tests, and the first one with
# its device backtrace.
first_reports() {
  awk -v want="$1" '
    function kernel_of(s,   i, j) {
      sub(/^ +/, "", s); sub(/^at /, "", s); sub(/^Device Frame: */, "", s)
      i = index(s, " at "); if (i > 0) s = substr(s, i + 4)
      # The older form: `0x1a2b in /path/file.cu:12:function(...)`.
      sub(/^0x[0-9a-fA-F]+ in [^:]*:[0-9]+:/, "", s)
      j = index(s, "+0x"); if (j > 0) s = substr(s, 1, j - 1)
      j = index(s, " in "); if (j > 0) s = substr(s, 1, j - 1)
      return s
    }
    function short(s) {
      gsub(/\(anonymous namespace\)/, "{anonymous}", s)
      while (gsub(/<[^<>]*>/, "", s)) {}
      while (gsub(/\([^()]*\)/, "", s)) {}
      sub(/^void /, "", s); sub(/ +$/, "", s)
      return s
    }
    function flush(   key) {
      if (!inblk) return
      inblk = 0
      if (frame != "") kern = frame
      key = (kern == "") ? "(no kernel named: " hdr ")" : (kern ~ /^\(/) ? kern : short(kern)
      if (!(key in count)) { order[++nk] = key; first[key] = blk; tests[key] = ""; ntests[key] = 0 }
      count[key]++
      if (!((key SUBSEP id) in seen)) {
        seen[key SUBSEP id] = 1; ntests[key]++
        if (ntests[key] <= 6) tests[key] = tests[key] (ntests[key] > 1 ? ", " : "") "`" id "`"
      }
    }
    BEGIN { FS = "\t" }
    $2 == want && ($6 ~ /^errors / || $6 == "timed out") {
      id = $3 ": " $4; lg = $9; inblk = 0
      while ((getline line < lg) > 0) {
        if (line !~ /^========= /) { flush(); continue }
        body = substr(line, 11)
        if (body ~ /^[^ ]/) {
          flush()
          if (body ~ /SUMMARY|^COMPUTE-SANITIZER|^Program hit|^Target application|^This can|^Saved host|^Device Frame|^Host Frame/) continue
          inblk = 1; blk = line; hdr = body; nl = 1; kern = ""; frame = ""
          if (body ~ /^Leaked /) kern = "(leaked allocations)"
          else if (body ~ / at .*\+0x/) kern = kernel_of(body)
        } else if (inblk) {
          if (body ~ /^ *$/) { flush(); continue }
          if (kern == "" && body ~ /^ +at /) kern = kernel_of(body)
          if (body ~ /^ +Device Frame:/) frame = kernel_of(body)
          if (nl < 30) { blk = blk "\n" line; nl++ }
        }
      }
      flush(); close(lg)
    }
    END {
      for (i = 1; i <= nk && i <= 12; i++) {
        key = order[i]
        more = ntests[key] > 6 ? ", ..." : ""
        printf "- `%s`: %d report%s in %d test%s: %s%s\n\n```\n%s\n```\n\n", key, count[key], count[key] == 1 ? "" : "s", \
          ntests[key], ntests[key] == 1 ? "" : "s", tests[key], more, first[key]
      }
      if (nk > 12) printf "- ... and %d more kernels (sanitize.log)\n\n", nk - 12
    }' "$2"
}

sanitize_all() {
  local runs="$out/sanitize-runs" k file dir tool started=$SECONDS
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
  local jobs="${GPUJOIN_SANITIZE_JOBS:-}"
  [[ -n "$jobs" ]] || jobs="$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)"
  [[ "$jobs" =~ ^[1-9][0-9]*$ ]] || jobs=1
  # `wait -n` (one job at a time) needs bash 4.3.
  if (( BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 3) )); then jobs=1; fi
  local version
  version="$("$CS" --version 2>/dev/null | tail -n 1)"
  local times_in="${GPUJOIN_SANITIZE_TIMES-}" tsv="$out/sanitize-times.tsv"
  if [[ -z "${GPUJOIN_SANITIZE_TIMES+set}" && -s "$tsv" ]]; then times_in="$tsv"; fi
  [[ "$times_in" == none ]] && times_in=""
  if [[ -n "$times_in" && ! -r "$times_in" ]]; then
    echo "run.sh sanitize: GPUJOIN_SANITIZE_TIMES=$times_in is not readable; ordering without times" >&2
    times_in=""
  fi
  local times_copy=""
  if [[ -n "$times_in" ]]; then times_copy="$runs/times-in.tsv"; cp "$times_in" "$times_copy"; fi

  # The tests of every executable (listed without the sanitizer: libtest does not start them).
  local i t ntests=() listed=0 list_failed=() no_tests=()
  for i in "${!files[@]}"; do
    local names
    names="$(list_tests "$i")"
    local lrc=$?
    if [[ $lrc -ne 0 ]]; then
      list_failed+=("$i")
      echo "run.sh sanitize: tests/${files[$i]} --list --format terse failed (exit $lrc): $(tail -n 3 "$runs/list-${files[$i]}.err" | tr '\n' ' ')" >&2
      names='*'
    elif [[ -z "$names" ]]; then
      # No test to run: none matches the filter, or every one is ignored; an executable that
      # lists nothing at all is a custom harness (harness = false) and runs whole as one job.
      if [[ -n "$filter" ]] || grep -q ': test$' "$runs/list-${files[$i]}.out"; then
        no_tests+=("${files[$i]}"); ntests[$i]=0; continue
      fi
      names='*'
    fi
    printf '%s\n' "$names" >"$runs/tests-$i.txt"
    ntests[$i]=$(wc -l <"$runs/tests-$i.txt")
    listed=$((listed + ntests[$i]))
  done
  # Default order: racecheck, initcheck, memcheck, synccheck (their usual cost), then
  # executables with most tests first.
  local seq=0 all="$runs/jobs.tsv"
  : >"$all"
  for tool in "${tools[@]}"; do
    local rank
    case "$tool" in racecheck) rank=3 ;; initcheck) rank=2 ;; memcheck) rank=1 ;; *) rank=0 ;; esac
    for i in "${!files[@]}"; do
      [[ -f "$runs/tests-$i.txt" ]] || continue
      mkdir -p "$runs/$tool/${files[$i]}"
      while IFS= read -r t; do
        seq=$((seq + 1))
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$seq" "$tool" "$i" "${files[$i]}" "$t" "$((rank * 1000000 + ntests[$i]))" >>"$all"
      done <"$runs/tests-$i.txt"
    done
  done
  local total=$seq
  echo "compute-sanitizer: $CS ($version); tools: ${tools[*]}; ${#files[@]} executables, $listed tests, $total jobs; $jobs at once; GPUJOIN_TEST_SIZE=$GPUJOIN_TEST_SIZE; limit ${GPUJOIN_TIMEOUT:-none}s per job; order: ${times_in:-default (no times file)}"
  order_jobs "$times_copy" <"$all" >"$runs/order.tsv"

  # Ctrl-C or a kill stops the jobs in flight too (and what `timeout` runs in its own group).
  trap 'for p in $(jobs -p); do pkill -TERM -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; exit 130' INT TERM
  local n=0 seqno
  while IFS=$'\t' read -r seqno tool i t <&4; do
    n=$((n + 1))
    if [[ -n "${GPUJOIN_SANITIZE_DEADLINE:-}" ]] && (( SECONDS - started >= GPUJOIN_SANITIZE_DEADLINE )); then
      # Past the deadline: the job is not started (its result says so).
      printf '%s\t%s\t%s\t%s\t0\tnot started\t-\tGPUJOIN_SANITIZE_DEADLINE %ss passed\t%s\n' "$seqno" "$tool" "${files[$i]}" "$t" "$GPUJOIN_SANITIZE_DEADLINE" "$runs/$tool/${files[$i]}/$seqno.log" >"$runs/$tool/${files[$i]}/$seqno.log.result"
      continue
    fi
    if [[ $jobs -gt 1 ]]; then
      while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n 2>/dev/null || true; done
      sanitize_job "$seqno" "$n" "$total" "$tool" "$i" "$t" &
    else
      sanitize_job "$seqno" "$n" "$total" "$tool" "$i" "$t"
    fi
  done 4<"$runs/order.tsv"
  wait
  trap - INT TERM
  local wall=$((SECONDS - started))

  # Results in the default order (tool, executable, test); a job with no .result (killed) fails.
  local results="$runs/results.tsv"
  : >"$results"
  while IFS=$'\t' read -r seqno tool i file t _ <&5; do
    local log="$runs/$tool/$file/$seqno.log"
    if [[ -f "$log.result" ]]; then
      cat "$log.result" >>"$results"
    else
      printf '%s\t%s\t%s\t%s\t0\tfailed\t-\tno result (killed?)\t%s\n' "$seqno" "$tool" "$file" "$t" "$log" >>"$results"
    fi
  done 5<"$all"
  printf 'tool\texe\ttest\tseconds\tstatus\n' >"$tsv"
  cut -f2-6 "$results" >>"$tsv"

  local md="$out/sanitize.md" slog="$out/sanitize.log" device
  device="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  : >"$slog"
  while IFS=$'\t' read -r _ _ _ _ _ _ _ _ log <&5; do cat "$log" >>"$slog" 2>/dev/null; done 5<"$results"
  local clean errs tmo failed
  clean=$(awk -F '\t' '$6 == "clean"' "$results" | wc -l)
  errs=$(awk -F '\t' '$6 ~ /^errors /' "$results" | wc -l)
  tmo=$(awk -F '\t' '$6 == "timed out"' "$results" | wc -l)
  failed=$(awk -F '\t' '$6 == "failed"' "$results" | wc -l)
  local notrun
  notrun=$(awk -F '\t' '$6 == "not started"' "$results" | wc -l)
  local line="sanitize: $total jobs (${#tools[@]} tools x ${#files[@]} executables, $listed tests): $clean clean, $errs with errors, $tmo timed out, $failed failed$( (( notrun > 0 )) && echo ", $notrun not started"); wall ${wall}s ($jobs at once, limit ${GPUJOIN_TIMEOUT:-none}s per job)"
  {
    echo "# compute-sanitizer, commit $GPUJOIN_COMMIT"
    echo
    echo "- $(date -u '+%Y-%m-%d %H:%M UTC'), ${device:-unknown device}, $CS ($version)"
    echo "- GPUJOIN_TEST_SIZE=$GPUJOIN_TEST_SIZE, GPUJOIN_REQUIRE_GPU=1${filter:+, filter \`$filter\`}; one compute-sanitizer process per tool and test (\`--exact <test> --test-threads=1\`), $jobs at once, the slowest first (times: ${times_in:-none}), limit ${GPUJOIN_TIMEOUT:-none}s per job"
    echo "- memcheck runs with \`--leak-check full\` (leaks count as errors); every tool with \`--show-backtrace ${GPUJOIN_SANITIZE_BACKTRACE:-device}\`${GPUJOIN_SANITIZE_FLAGS:+ and \`$GPUJOIN_SANITIZE_FLAGS\`}"
    [[ -n "${GPUJOIN_RACECHECK_LAUNCHES:-}" ]] && echo "- racecheck checks the first $GPUJOIN_RACECHECK_LAUNCHES kernel launches of each test (\`--launch-count\`); the rest run unchecked"
    echo "- full output: sanitize.log (per job: sanitize-runs/<tool>/<exe>/<n>.log); every job's seconds and status: sanitize-times.tsv (GPUJOIN_SANITIZE_TIMES for the next run's order)"
    echo
    echo "$line"
    echo
    sanitize_tables "$results"
    if [[ ${#list_failed[@]} -gt 0 || ${#no_tests[@]} -gt 0 ]]; then
      echo
      for i in ${list_failed[@]+"${list_failed[@]}"}; do echo "- tests/${files[$i]}: \`--list --format terse\` failed; ran the whole executable as one job"; done
      for file in ${no_tests[@]+"${no_tests[@]}"}; do echo "- tests/$file: no test to run (none matches the filter, or all are ignored)"; done
    fi
    if [[ $((errs + tmo + failed + notrun)) -gt 0 ]]; then
      echo
      echo "## Not clean"
      echo
      echo "| tool | executable | test | status | seconds | log |"
      echo "|---|---|---|---|---|---|"
      awk -F '\t' -v out="$out/" '$6 != "clean" {
          lg = $9; if (index(lg, out) == 1) lg = substr(lg, length(out) + 1)
          printf "| %s | %s | `%s` | %s%s | %s | %s |\n", $2, $3, $4, $6, ($8 != "-" ? " (" $8 ")" : ""), $5, lg
        }' "$results"
      echo
      echo "Rerun one job: \`GPUJOIN_SANITIZE_ONLY=<executable> bash bundle/run.sh sanitize <tool> <test>\`"
      echo "(or \`cargo xtask sanitize <tool> <test>\` with \`GPUJOIN_SANITIZE_BACKTRACE=yes\` for the host frames that name the Rust caller)."
      local tool_reports
      for tool in "${tools[@]}"; do
        tool_reports="$(first_reports "$tool" "$results")"
        [[ -n "$tool_reports" ]] || continue
        echo
        echo "### $tool: first reports by kernel"
        echo
        echo "$tool_reports"
      done
      if [[ $((tmo + failed)) -gt 0 ]]; then
        echo
        echo "### Timed out or failed: the end of each output"
        echo
        echo "A timed-out test is too large for the sanitizer: shrink it under GPUJOIN_TEST_SIZE=small"
        echo "(gpujoin_device::testing::{rows, cases, pick}) or split it; a failed one's panic is below."
        while IFS=$'\t' read -r _ tool file t secs st _ note log <&5; do
          [[ "$st" == "timed out" || "$st" == failed ]] || continue
          [[ "$note" == - ]] && note=""
          echo
          echo "#### $tool: $file \`$t\`: $st${note:+ ($note)}, ${secs}s"
          echo
          echo '```'
          local lines
          lines="$(grep -A 6 -m 2 'panicked at' "$log" 2>/dev/null | head -n 16)"
          if [[ -n "$lines" ]]; then echo "$lines"; else tail -n 12 "$log" 2>/dev/null; fi
          echo '```'
        done 5<"$results"
      fi
    fi
    echo
    echo "## Slowest jobs"
    echo
    echo "| tool | executable | test | seconds | status |"
    echo "|---|---|---|---|---|"
    sort -t $'\t' -k5,5nr "$results" | head -n 15 | awk -F '\t' '{ printf "| %s | %s | `%s` | %s | %s |\n", $2, $3, $4, $5, $6 }'
  } >"$md"
  echo
  echo "==> $md"
  cat "$md"
  echo
  echo "$line; table in $md, output in $slog, times in $tsv"
  [[ $((errs + tmo + failed + notrun)) -eq 0 ]]
}

echo "gpujoin bundle $GPUJOIN_COMMIT: $what${filter:+ (filter: $filter)}, GPUJOIN_REQUIRE_GPU=$GPUJOIN_REQUIRE_GPU, output in $out"
if [[ "$what" == sanitize ]]; then
  sanitize_all
  exit $?
fi
if [[ "$what" == tests || "$what" == all ]]; then
  if [[ "${GPUJOIN_LANES:-1}" =~ ^[0-9]+$ && "${GPUJOIN_LANES:-1}" -gt 1 ]] && command -v flock >/dev/null; then
    run_lanes "$out/tests.log"
  else
    run_kind tests "$out/tests.log"
  fi
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
