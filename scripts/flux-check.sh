#!/bin/bash
# flux-check.sh — check by hand, on one Linux host, how molotof runs under
# Flux (`flux run`) when one node's processes die. NOT part of the test suite
# (npm test needs no Flux).
#
# Needs: flux-core (Debian has no package: build a release, e.g. v0.88.0, with
# `./configure --prefix=/opt/flux --disable-docs`; its simple scheduler is
# enough), node 20; run from the repository root:
#
#     PATH=/opt/flux/bin:$PATH scripts/flux-check.sh          # all checks
#     PATH=/opt/flux/bin:$PATH scripts/flux-check.sh spare    # only some, of:
#                      plain spare spare0 spare-default shrink none broker-noncritical broker
#
# It starts a throwaway Flux instance, `flux start --test-size=6`: 6 brokers on
# this host, each a "node" of the instance's resources, and runs the checks
# inside it (this script again, with `--inside`); the instance ends with the
# checks (on failure or ^C too), and the temp dir is removed. Every node
# supervisor is a task of `flux run -N<nodes> -n<nodes>`; the rendezvous is on
# 127.0.0.1. A node's loss is SIGKILL to its node supervisor and ranks (its
# flux-shell lives and reports the task's end; `broker`: its broker too) and
# its checkpoint directory deleted. Each check prints the commands, the exit
# codes of `flux run` and `flux job status`, the status file, and a verdict line
# `PASS|FAIL <check>: …`; the checksum is compared with the serial solver's
# (examples/jacobi/serial.ts). Exit code: the number of failed checks.
# Checks:
#   plain          4 nodes, no fault: exit 0, the serial checksum
#   spare          4 nodes + 1 spare, `-o exit-timeout=none`, node 1's tasks killed: the spare takes rank 1
#   spare0         the same, node 0's tasks killed: node 1 takes the coordinator's role over
#   spare-default  `spare` without the option, a run longer than 30 s: Flux's default exit-timeout (30 s after
#                  the first task exits) raises a fatal exception and ends the job (no node writes an end)
#   shrink         4 nodes, no spare, `-o exit-timeout=none`: the run goes on with 3 ranks
#   none           2 nodes, node 1 killed: 76 in the status file, `flux run` again resumes
#   broker-noncritical  4 nodes + 1 spare, only shell 0 critical (the job-exec.critical-ranks RPC), node 1's broker
#                  killed with its tasks (a lost node): a non-fatal node-failure exception, the spare takes rank 1
#   broker         the same with every shell critical (flux run's default): a fatal exception, the job's tasks
#                  get SIGTERM, the run checkpoints and stops with 75
# Each broker check leaves the instance one broker less (6 at the start): they run last.
# Seen with flux-core 0.88.0: see docs/REFERENCE.md "Under Flux".
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
NODES=6                    # 5 for a run with a spare, and one more: a broker check leaves one broker less
PORT0=16960                # rendezvous ports PORT0.. (one per check)
N=40; ITER=2500            # Jacobi size: a run of about 8 s on 2 cores

if [ "${1:-}" != --inside ]; then
  for c in flux node; do command -v $c >/dev/null || { echo "flux-check: $c is missing (PATH=/opt/flux/bin:\$PATH?)"; exit 2; }; done
  T=$(mktemp -d /tmp/molotof-flux-check-XXXXXX)
  export T
  cleanup() { [ -n "${FLUX_PID:-}" ] && kill -9 -- -"$FLUX_PID" 2>/dev/null; rm -rf "$T"; }
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  # Its own process group, so that ^C or a failure takes every broker and task with it.
  # --test-exit-mode=leader: a broker killed by a check does not end the instance.
  setsid flux start --test-size=$NODES --test-exit-mode=leader "$0" --inside "$@" &
  FLUX_PID=$!
  wait $FLUX_PID
  code=$?
  FLUX_PID=
  exit $code
fi
shift
CHECKS=${*:-"plain spare spare0 spare-default shrink none broker-noncritical broker"}
FAILED=0
say() { echo "+ $*"; }
verdict() { # verdict <check> <ok 0|1> <text>
  if [ "$2" = 0 ]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; FAILED=$((FAILED + 1)); fi
}
say flux resource list; flux resource list

serial() { # serial <iterations>
  (cd "$REPO" && node_modules/.bin/tsx -e "import { jacobiSerial, interiorSum } from './examples/jacobi/serial.ts'; console.log(interiorSum(jacobiSerial($N, $1), $N))")
}
export MOLOTOF_SECRET=flux-check-$RANDOM$RANDOM$RANDOM
MOLOTOF=("$REPO/node_modules/.bin/tsx" "$REPO/src/cli/main.ts")
[ -x "$REPO/bin/molotof.mjs" ] && MOLOTOF=(node "$REPO/bin/molotof.mjs")

# The node supervisor of node <i> in job <id> (its FLUX_TASK_RANK) and every process under it.
node_pids() {
  local want=$1 job=$2 pid env
  for pid in $(pgrep -f 'molotof'); do
    env=$(tr '\0' '\n' < /proc/$pid/environ 2>/dev/null) || continue
    grep -qx "FLUX_TASK_RANK=$want" <<<"$env" && grep -qx "FLUX_JOB_ID=$job" <<<"$env" || continue
    # a supervisor, not one of its ranks (they inherit the environment): its parent is the flux-shell
    ps -o comm= -p "$(ps -o ppid= -p $pid | tr -d ' ')" | grep -q flux-shell || continue
    echo $pid
    descendants $pid
  done
}
descendants() { local c; for c in $(pgrep -P "$1"); do echo $c; descendants $c; done; }

# lose_node <node> <job id> <ckpt prefix> [broker]: SIGKILL its supervisor and ranks (and its broker), delete its disk.
lose_node() {
  local pids
  pids=$(node_pids "$1" "$2" | tr '\n' ' ')
  if [ "${4:-}" = broker ]; then
    # The broker that runs the node's flux-shell, the supervisor's parent (single-user Flux: no IMP in between).
    local sup shell b
    sup=${pids%% *}; shell=$(ps -o ppid= -p "$sup" | tr -d ' '); b=$(ps -o ppid= -p "$shell" | tr -d ' ')
    ps -o comm= -p "$b" | grep -q '^flux-broker' && pids="$pids $b"
  fi
  say "kill -9 $pids   # node $1: $(for p in $pids; do tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-40; echo -n '| '; done)"
  kill -9 $pids 2>/dev/null
  rm -rf "$3$1"
}

checksum_ok() { # checksum_ok <output file> <serial>
  local got
  got=$(grep -Eo 'checksum [^ ]+' "$1" | head -1 | cut -d' ' -f2)
  [ -n "$got" ] && node -e "process.exit(Object.is(Number('$got'), Number('$2')) ? 0 : 1)"
}
status_code() { node -p "try { require('$1').exitCode } catch { 'none' }"; }

# run_case <name> <nodes> <spare> <iterations> <flux run options> [kill: node [broker]]
PORT=$PORT0
run_case() {
  local name=$1 nodes=$2 spare=$3 iter=$4 opts=$5; shift 5
  local dir=$T/work/$name out=$T/work/$name.out
  PORT=$((PORT + 1))
  mkdir -p "$dir"
  # shellcheck disable=SC2206
  local frun=(flux run -N$nodes -n$nodes $opts)
  local run=("${MOLOTOF[@]}" run "$REPO/examples/jacobi/jacobi.ts" --n $N --iterations $iter --ranks-per-node 1
    --checkpoint every:100 --checkpoint-dir "$dir/ckpt-{node}" --memory-checkpoint every:20 --memory-dir "$dir/mem-{node}"
    --rendezvous 127.0.0.1:$PORT --status-file "$dir/status.json" --log all --resume-or-start)
  [ "$spare" -gt 0 ] && run+=(--spare-nodes "$spare")
  say "${frun[*]} ${run[*]}"
  local prev; prev=$(flux job last 2>/dev/null)
  (cd "$dir" && exec "${frun[@]}" "${run[@]}") > "$out" 2>&1 &
  local run_pid=$! job=
  for _ in $(seq 1 100); do job=$(flux job last 2>/dev/null) && [ -n "$job" ] && [ "$job" != "$prev" ] && break; sleep 0.1; done
  if [ -n "${CRITICAL:-}" ]; then
    # Only these shells' loss is fatal to the job (by default every shell of a `flux run` is critical).
    say "flux python -c '…rpc(\"job-exec.critical-ranks\", {\"id\": $job, \"ranks\": \"$CRITICAL\"})'"
    flux python -c "import flux, sys; from flux.job import JobID; flux.Flux().rpc('job-exec.critical-ranks', {'id': JobID(sys.argv[1]), 'ranks': sys.argv[2]}).get(); print('  critical ranks set to', sys.argv[2])" "$job" "$CRITICAL"
  fi
  if [ $# -gt 0 ]; then
    # Once the partners hold copies (checkpoint 2), mid-run.
    for _ in $(seq 1 600); do grep -q 'checkpoint 2 committed to partner' "$out" && break; kill -0 $run_pid 2>/dev/null || break; sleep 0.1; done
    if grep -q 'checksum' "$out"; then echo "  (the run ended before node $1 could be killed)"; else lose_node "$1" "$job" "$dir/ckpt-" "${2:-}"; fi
  fi
  # flux run gets 180 s: a check that hangs says so instead of hanging the script.
  for _ in $(seq 1 1800); do kill -0 $run_pid 2>/dev/null || break; sleep 0.1; done
  local hung=no
  if kill -0 $run_pid 2>/dev/null; then
    hung=yes; echo "  flux run still running after 180 s; its last lines:"; tail -25 "$out" | sed 's/^/  | /'
    flux cancel "$job" 2>/dev/null; sleep 3; kill -9 $run_pid 2>/dev/null
  fi
  wait $run_pid
  local code=$?
  [ $hung = yes ] && code="$code (hung: cancelled after 180 s)"
  flux job status "$job" >/dev/null 2>&1
  local jstatus=$?
  echo "  flux run exit code: $code; flux job status $job: $jstatus"
  echo "  status file: $(tr -d '\n' < "$dir/status.json" 2>/dev/null | cut -c1-300)"
  grep -E 'lost|spare node|checksum|flux-job|flux-shell|exception|error|signal|SIG|stop' "$out" | grep -v 'committed' | head -20 | sed 's/^/  | /'
  grep -q '"running"' "$dir/status.json" 2>/dev/null && { echo "  no supervisor wrote an end; the output's last lines:"; tail -8 "$out" | sed 's/^/  | /'; }
  flux job eventlog "$job" 2>/dev/null | grep -E 'exception|finish' | sed 's/^/  eventlog | /'
  LAST_CODE=$code LAST_JSTATUS=$jstatus LAST_OUT=$out LAST_STATUS=$dir/status.json
}

for check in $CHECKS; do
  echo
  echo "=== $check"
  case $check in
    plain)
      S=$(serial $ITER)
      run_case plain 4 0 $ITER ""
      ok=1; checksum_ok "$LAST_OUT" "$S" && [ "$LAST_CODE" = 0 ] && [ "$(status_code "$LAST_STATUS")" = 0 ] && ok=0
      verdict plain $ok "4 nodes, no fault: flux run $LAST_CODE, job status $LAST_JSTATUS, status $(status_code "$LAST_STATUS"), checksum = serial: $(checksum_ok "$LAST_OUT" "$S" && echo yes || echo no)"
      ;;
    spare)
      S=$(serial $ITER)
      run_case spare 5 1 $ITER "-o exit-timeout=none" 1
      took=$(grep -q 'spare node 4 took rank 1' "$LAST_OUT" && echo yes || echo no)
      ok=1; checksum_ok "$LAST_OUT" "$S" && [ "$(status_code "$LAST_STATUS")" = 0 ] && [ $took = yes ] && ok=0
      verdict spare $ok "4 nodes + 1 spare, -o exit-timeout=none, node 1's tasks killed: flux run $LAST_CODE, job status $LAST_JSTATUS, status exitCode $(status_code "$LAST_STATUS"), spare took over: $took, checksum = serial: $(checksum_ok "$LAST_OUT" "$S" && echo yes || echo no)"
      ;;
    spare0)
      S=$(serial $ITER)
      run_case spare0 5 1 $ITER "-o exit-timeout=none" 0
      ok=1; checksum_ok "$LAST_OUT" "$S" && [ "$(status_code "$LAST_STATUS")" = 0 ] && ok=0
      verdict spare0 $ok "4 nodes + 1 spare, -o exit-timeout=none, node 0's tasks killed (the coordinator): flux run $LAST_CODE, job status $LAST_JSTATUS, status exitCode $(status_code "$LAST_STATUS"), written by node $(node -p "try { require('$LAST_STATUS').node } catch { 'none' }"), checksum = serial: $(checksum_ok "$LAST_OUT" "$S" && echo yes || echo no)"
      ;;
    spare-default)
      # 20000 iterations: about 60 s, so that the run outlasts the default 30 s exit-timeout after the loss. Then the
      # leader shell SIGKILLs node 0's tasks (flux_shell_fatal), the others get SIGTERM and SIGKILL 5 s later:
      # no node writes an end (the status file says "running"; README's loop runs again and resumes).
      run_case spare-default 5 1 20000 "" 1
      st=$(status_code "$LAST_STATUS")
      timed=$(grep -q 'exit-timeout=30s has expired' "$LAST_OUT" && echo yes || echo no)
      ok=1; [ $timed = yes ] && [ "$st" != 0 ] && ok=0
      verdict spare-default $ok "the same with flux run's defaults, a 60 s run: the job ended by the exit-timeout exception 30 s after the kill: $timed, flux run $LAST_CODE, job status $LAST_JSTATUS, status exitCode $st (not 0: the default does not keep the job)"
      ;;
    shrink)
      S=$(serial $ITER)
      run_case shrink 4 0 $ITER "-o exit-timeout=none" 1
      ok=1; checksum_ok "$LAST_OUT" "$S" && [ "$(status_code "$LAST_STATUS")" = 0 ] && ok=0
      verdict shrink $ok "4 nodes, no spare, node 1 killed: flux run $LAST_CODE, job status $LAST_JSTATUS, status exitCode $(status_code "$LAST_STATUS"), checksum = serial: $(checksum_ok "$LAST_OUT" "$S" && echo yes || echo no)"
      ;;
    none)
      S=$(serial $ITER)
      run_case none 2 0 $ITER "-o exit-timeout=none" 1
      first=$LAST_CODE; firstj=$LAST_JSTATUS; firststatus=$(status_code "$LAST_STATUS")
      echo "  the batch loop: status says $firststatus, so run again (it resumes)"
      rm -f "$LAST_STATUS"
      PORT=$((PORT - 1))   # the same rendezvous, as a batch loop would
      run_case none 2 0 $ITER "-o exit-timeout=none"
      ok=1; [ "$firststatus" = 76 ] && checksum_ok "$LAST_OUT" "$S" && [ "$(status_code "$LAST_STATUS")" = 0 ] && grep -qi 'resum' "$LAST_OUT" && ok=0
      verdict none $ok "2 nodes, node 1 killed: flux run $first, job status $firstj, status exitCode $firststatus; again: flux run $LAST_CODE, status $(status_code "$LAST_STATUS"), resumed: $(grep -qi 'resum' "$LAST_OUT" && echo yes || echo no), checksum = serial: $(checksum_ok "$LAST_OUT" "$S" && echo yes || echo no)"
      ;;
    broker)
      # Last: the instance keeps one broker less. Every shell of the job is critical: its loss is a fatal exception,
      # the job's tasks get SIGTERM, the run checkpoints and stops (75) although the spare had taken the ranks over.
      run_case broker 5 1 $ITER "-o exit-timeout=none" 1 broker
      st=$(status_code "$LAST_STATUS")
      ok=1; grep -q 'exception.*node failure' "$LAST_OUT" && [ "$st" = 75 ] && ok=0
      verdict broker $ok "4 nodes + 1 spare, node 1's broker and tasks killed: fatal node failure exception: $(grep -q 'exception.*node failure' "$LAST_OUT" && echo yes || echo no), flux run $LAST_CODE, job status $LAST_JSTATUS, status exitCode $st"
      ;;
    broker-noncritical)
      # The same with only shell 0 critical (the job-exec.critical-ranks RPC, as a Flux sub-instance sends for itself):
      # the node's loss is a non-fatal exception, the spare takes its rank, the run finishes.
      S=$(serial $ITER)
      CRITICAL=0 run_case broker-noncritical 5 1 $ITER "-o exit-timeout=none" 1 broker
      st=$(status_code "$LAST_STATUS")
      ok=1; checksum_ok "$LAST_OUT" "$S" && [ "$st" = 0 ] && ok=0
      verdict broker-noncritical $ok "4 nodes + 1 spare, critical ranks 0, node 1's broker and tasks killed: flux run $LAST_CODE, job status $LAST_JSTATUS, status exitCode $st, checksum = serial: $(checksum_ok "$LAST_OUT" "$S" && echo yes || echo no)"
      ;;
    *) echo "flux-check: unknown check $check"; FAILED=$((FAILED + 1)) ;;
  esac
done
echo
echo "flux-check: $FAILED failed"
exit $FAILED
