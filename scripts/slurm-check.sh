#!/bin/bash
# slurm-check.sh — check by hand, on one Linux host, how molotof runs under a
# real Slurm (srun, sbatch) when one node's processes die. NOT part of the
# test suite (npm test needs no Slurm).
#
# Needs: root, iproute2, Debian's `apt-get install -y slurm-wlm munge`
# (Slurm 22.05), node 20; run from the repository root:
#
#     sudo scripts/slurm-check.sh            # all checks
#     sudo scripts/slurm-check.sh spare      # only some, of: plain spare spare-bare spare-node
#                                            #   spare-node-bare spare-stepd shrink none sbatch sbatch-node
# (-bare: srun without --no-kill --kill-on-bad-exit=0)
#
# It builds a throwaway cluster: one munged (its own key and socket) and
# slurmctld in the root network namespace, and 5 slurmd (nodes mc0..mc4), each
# in its own network namespace with its own address (10.79.0.1..5, veth pairs
# on a bridge where the host is 10.79.0.254), spool and logs in a temp dir,
# proctrack/linuxproc, select/linear, no cgroups (cgroup.conf names v1 only
# because slurmd 22.05 loads the plugin anyway). A node's loss is SIGKILL to
# its node supervisor and ranks (and, per check, its slurmstepd or its slurmd:
# see lose_node) and its checkpoint directory deleted. Each check
# prints the commands, srun's exit code, the status file, and a verdict line
# `PASS|FAIL <check>: …`; the checksum is compared with the serial solver's
# (examples/jacobi/serial.ts). Everything (daemons, namespaces, temp dir) is
# removed on exit, on failure too. Exit code: the number of failed checks.
# Checks (each prints its commands, srun's exit code, the status file, a verdict):
#   plain            4 nodes, no fault: exit 0, the serial checksum
#   spare            4 nodes + 1 spare (--spare-nodes 1), node 1's tasks killed: the spare takes rank 1
#   spare-bare       the same with a bare srun (no --no-kill/--kill-on-bad-exit=0)
#   spare-node       the whole node dies (slurmd too): slurmctld sets it DOWN
#   spare-node-bare  the same without --no-kill: Slurm cancels the step once the node is DOWN
#                    (a run still going then stops with 75; one that ended first finished)
#   spare-stepd      slurmstepd and the tasks die, slurmd lives: srun never returns (killed after 120 s)
#   shrink           4 nodes, no spare: the run goes on with 3 ranks
#   none             2 nodes, node 1 killed: 76 in the status file, srun again resumes
#   sbatch           README's batch loop (#SBATCH --no-kill, srun --overlap, the status file) on 2 nodes
#   sbatch-node      the same, the whole node dying: the loop ends srun, and runs again (once more
#                    when srun tried the node before slurmctld set it DOWN) on the node left
# Seen with Slurm 22.05.8 (Debian bookworm): srun exits 137 when a task was killed, 0 after a node
# failure, never returns when only slurmstepd died; the status file holds the run's code.
set -u
REPO=$(cd "$(dirname "$0")/.." && pwd)
CHECKS=${*:-"plain spare spare-bare spare-node spare-node-bare spare-stepd shrink none sbatch sbatch-node"}
LOSS=tasks
KEEP="--no-kill --kill-on-bad-exit=0"   # the flags README gives srun
SRUN_FLAGS=$KEEP
P=mcx                      # namespace/interface prefix (kept short: interface names ≤ 15)
SUB=10.79.0
NODES=5
PORT0=16917                # slurmctld; slurmd is PORT0+1 in every namespace
N=40; ITER=2500            # Jacobi size: a run of a few seconds on 2 cores
[ "$(id -u)" = 0 ] || { echo "slurm-check: run as root (namespaces, slurmd)"; exit 2; }
for c in slurmctld slurmd srun munged ip node; do command -v $c >/dev/null || { echo "slurm-check: $c is missing (apt-get install -y slurm-wlm munge)"; exit 2; }; done

T=$(mktemp -d /tmp/molotof-slurm-check-XXXXXX)
chmod 755 "$T"
FAILED=0
cleanup() {
  set +e
  [ -n "${JOBS_STARTED:-}" ] && SLURM_CONF=$T/slurm.conf scancel --full -u root >/dev/null 2>&1
  for i in $(seq 0 $((NODES - 1))); do
    for pid in $(ip netns pids $P$i 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  done
  for f in "$T"/ctld.pid "$T"/munged.pid; do [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; done
  sleep 0.5
  for i in $(seq 0 $((NODES - 1))); do ip netns del $P$i 2>/dev/null; ip link del ${P}v$i 2>/dev/null; done
  ip link del ${P}br 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "+ $*"; }
verdict() { # verdict <check> <ok 0|1> <text>
  if [ "$2" = 0 ]; then echo "PASS $1: $3"; else echo "FAIL $1: $3"; FAILED=$((FAILED + 1)); fi
}

# --- the network: a bridge, one namespace per node -------------------------
ip link add ${P}br type bridge && ip link set ${P}br up && ip addr add $SUB.254/24 dev ${P}br || exit 2
for i in $(seq 0 $((NODES - 1))); do
  ip netns add $P$i && ip link add ${P}v$i type veth peer name ${P}e$i &&
    ip link set ${P}e$i netns $P$i && ip link set ${P}v$i master ${P}br && ip link set ${P}v$i up &&
    ip -n $P$i link set ${P}e$i name eth0 && ip -n $P$i addr add $SUB.$((i + 1))/24 dev eth0 &&
    ip -n $P$i link set eth0 up && ip -n $P$i link set lo up && ip -n $P$i route add default via $SUB.254 || exit 2
done

# --- munge: a key and a socket of our own ----------------------------------
mkdir -p "$T/munge" && chmod 700 "$T/munge"
head -c 1024 /dev/urandom > "$T/munge/key" && chmod 400 "$T/munge/key"
munged --force --socket="$T/munge/sock" --key-file="$T/munge/key" --pid-file="$T/munged.pid" \
  --log-file="$T/munge/log" --seed-file="$T/munge/seed" || { echo "slurm-check: munged did not start"; exit 2; }

# --- slurm.conf -------------------------------------------------------------
HOST=$(hostname)
mkdir -p "$T/state" "$T/spool" "$T/log" "$T/work"
{
  echo "ClusterName=molotofcheck"
  echo "SlurmctldHost=$HOST($SUB.254)"
  echo "SlurmctldPort=$PORT0"
  echo "SlurmdPort=$((PORT0 + 1))"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$T/munge/sock"
  echo "CredType=cred/munge"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "StateSaveLocation=$T/state"
  echo "SlurmdSpoolDir=$T/spool/%n"
  echo "SlurmctldPidFile=$T/ctld.pid"
  echo "SlurmdPidFile=$T/spool/%n.pid"
  echo "SlurmctldLogFile=$T/log/slurmctld.log"
  echo "SlurmdLogFile=$T/log/%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "SelectType=select/linear"
  echo "SchedulerType=sched/builtin"
  echo "MpiDefault=none"
  echo "SwitchType=switch/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "ReturnToService=2"
  echo "SlurmdParameters=config_overrides"
  echo "SlurmdTimeout=10"
  echo "InactiveLimit=0"
  echo "KillWait=5"
  for i in $(seq 0 $((NODES - 1))); do echo "NodeName=mc$i NodeAddr=$SUB.$((i + 1)) NodeHostname=mc$i CPUs=1 State=UNKNOWN"; done
  echo "PartitionName=check Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
} > "$T/slurm.conf"
# slurmd 22.05 loads a cgroup plugin even with proctrack/linuxproc and task/none; its
# autodetection fails on a hybrid hierarchy (a tmpfs at /sys/fs/cgroup): name v1.
printf 'CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n' > "$T/cgroup.conf"
export SLURM_CONF=$T/slurm.conf

slurmctld -i -f "$T/slurm.conf" || { echo "slurm-check: slurmctld did not start"; cat "$T/log/slurmctld.log"; exit 2; }
for i in $(seq 0 $((NODES - 1))); do
  mkdir -p "$T/spool/mc$i"
  ip netns exec $P$i slurmd -N mc$i -f "$T/slurm.conf" || { echo "slurm-check: slurmd mc$i did not start"; cat "$T/log/mc$i.log"; exit 2; }
done
for _ in $(seq 1 60); do
  [ "$(sinfo -h -N -t idle -o %N | wc -l)" = $NODES ] && break
  sleep 0.5
done
say sinfo -N; sinfo -N
[ "$(sinfo -h -N -t idle -o %N | wc -l)" = $NODES ] || { echo "slurm-check: the nodes did not come up idle"; tail -20 "$T"/log/*.log; exit 2; }

SERIAL=$(cd "$REPO" && node_modules/.bin/tsx -e "import { jacobiSerial, interiorSum } from './examples/jacobi/serial.ts'; console.log(interiorSum(jacobiSerial($N, $ITER), $N))")
echo "serial checksum (examples/jacobi/serial.ts, n=$N, $ITER iterations): $SERIAL"
export MOLOTOF_SECRET=slurm-check-$RANDOM$RANDOM
MOLOTOF=("$REPO/node_modules/.bin/tsx" "$REPO/src/cli/main.ts")
[ -x "$REPO/bin/molotof.mjs" ] && MOLOTOF=(node "$REPO/bin/molotof.mjs")

# Lose node <i> the way $LOSS says, and its disk with it:
#   tasks: the node supervisor and its ranks SIGKILLed (slurmstepd lives: it reports the tasks killed);
#   stepd: every process of the namespace but slurmd (slurmstepd too: nobody reports the tasks' end);
#   node:  every process of the namespace, slurmd included (the node is down for slurmctld).
lose_node() {
  local ns=$P$1 slurmd pids=() cmd
  slurmd=$(cat "$T/spool/mc$1.pid")
  for pid in $(ip netns pids "$ns"); do
    cmd=$(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null)
    case $LOSS:$cmd in
      tasks:slurmstepd*|tasks:slurmd*|stepd:slurmd\ *) ;;
      *) pids+=("$pid") ;;
    esac
  done
  say "kill -9 ${pids[*]}   # node $1 (mc$1), loss '$LOSS': $(for p in "${pids[@]}"; do tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-30; echo -n '| '; done)"
  kill -9 "${pids[@]}" 2>/dev/null
  rm -rf "$2$1"
  LOST_SLURMD=
  [ "$LOSS" = node ] && LOST_SLURMD=$1
}

# After a check: a slurmd killed with its node started again, every node idle again.
restore_nodes() {
  if [ -n "${LOST_SLURMD:-}" ]; then
    ip netns exec $P$LOST_SLURMD slurmd -N mc$LOST_SLURMD -f "$T/slurm.conf"
    scontrol update nodename=mc$LOST_SLURMD state=resume 2>/dev/null
    LOST_SLURMD=
  fi
  for _ in $(seq 1 120); do [ "$(sinfo -h -N -t idle -o %N | wc -l)" = $NODES ] && return; sleep 0.5; done
  echo "  (not every node is idle again:)"; sinfo -N | sed 's/^/  | /'
}

# Wait until file $1 matches regex $2 (60 s at most).
wait_for() { for _ in $(seq 1 600); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

checksum_ok() { # checksum_ok <output file>
  local got
  got=$(grep -Eo 'checksum [^ ]+' "$1" | head -1 | cut -d' ' -f2)
  [ -n "$got" ] && node -e "process.exit(Object.is(Number('$got'), Number('$SERIAL')) ? 0 : 1)"
}
status_code() { node -p "try { require('$1').exitCode } catch { 'none' }"; }

# run_case <name> <nodes> <spare> <kills: node numbers, killed one after the other>
run_case() {
  local name=$1 nodes=$2 spare=$3; shift 3
  local dir=$T/work/$name out=$T/work/$name.out
  mkdir -p "$dir"
  local srun=(srun --nodes=$nodes --ntasks=$nodes --ntasks-per-node=1 --nodelist=mc[0-$((nodes - 1))] $SRUN_FLAGS)
  local run=("${MOLOTOF[@]}" run "$REPO/examples/jacobi/jacobi.ts" --n $N --iterations $ITER --ranks-per-node 1
    --checkpoint every:100 --checkpoint-dir "$dir/ckpt-{node}" --memory-checkpoint every:20 --memory-dir "$dir/mem-{node}"
    --rendezvous $SUB.1:$((PORT0 + 100)) --status-file "$dir/status.json" --log all --resume-or-start)
  [ "$spare" -gt 0 ] && run+=(--spare-nodes "$spare")
  say "${srun[*]} ${run[*]}"
  (cd "$dir" && exec "${srun[@]}" "${run[@]}") > "$out" 2>&1 &
  local srun_pid=$!
  if [ $# -gt 0 ]; then
    # Once the partners hold copies (checkpoint 2), mid-run.
    for _ in $(seq 1 600); do grep -q 'checkpoint 2 committed to partner' "$out" && break; kill -0 $srun_pid 2>/dev/null || break; sleep 0.1; done
    if grep -q 'checksum' "$out"; then echo "  (the run ended before node $1 could be killed)"; else lose_node "$1" "$dir/ckpt-"; fi
  fi
  # srun gets 120 s: a check that hangs says so (and what was printed) instead of hanging the script.
  for _ in $(seq 1 1200); do kill -0 $srun_pid 2>/dev/null || break; sleep 0.1; done
  local hung=no
  if kill -0 $srun_pid 2>/dev/null; then
    hung=yes
    echo "  srun still running after 120 s; its last lines, then the processes left:"
    tail -25 "$out" | sed 's/^/  | /'
    for i in $(seq 0 $((NODES - 1))); do echo "  mc$i: $(for p in $(ip netns pids $P$i); do tr '\0' ' ' < /proc/$p/cmdline | cut -c1-50; echo -n ' | '; done)"; done
    squeue -s 2>&1 | sed 's/^/  | /'
    kill -9 $srun_pid; scancel --full -u root 2>/dev/null
  fi
  wait $srun_pid
  local code=$?
  [ $hung = yes ] && code="$code (srun hung: killed after 120 s)"
  echo "  srun exit code: $code"
  echo "  status file: $(cat "$dir/status.json" 2>/dev/null | tr -d '\n' | cut -c1-300)"
  grep -E 'lost|spare node|checksum|srun|slurmstepd|error' "$out" | grep -v 'committed' | head -20 | sed 's/^/  | /'
  restore_nodes
  LAST_CODE=$code LAST_OUT=$out LAST_STATUS=$dir/status.json LAST_DIR=$dir
}

for check in $CHECKS; do
  echo
  echo "=== $check"
  case $check in
    plain)
      run_case plain 4 0
      checksum_ok "$LAST_OUT"; verdict plain $(( LAST_CODE != 0 || $? != 0 )) "4 nodes, no fault: srun $LAST_CODE, status $(status_code "$LAST_STATUS"), checksum = serial: $(checksum_ok "$LAST_OUT" && echo yes || echo no)"
      ;;
    spare|spare-bare|spare-node|spare-node-bare|spare-stepd)
      LOSS=tasks; SRUN_FLAGS=$KEEP
      case $check in *node*) LOSS=node ;; *stepd) LOSS=stepd ;; esac
      case $check in *bare) SRUN_FLAGS= ;; esac
      run_case $check 5 1 1
      flags=${SRUN_FLAGS:-no flags}; SRUN_FLAGS=$KEEP
      took=$(grep -q 'spare node 4 took rank 1' "$LAST_OUT" && echo yes || echo no)
      same=$(checksum_ok "$LAST_OUT" && echo yes || echo no)
      st=$(status_code "$LAST_STATUS")
      ok=1
      if [ $check = spare-node-bare ]; then
        # Without --no-kill Slurm cancels the step once it sets the node DOWN (SlurmdTimeout): a run still going then
        # checkpoints and stops (75); one that ended before finished (0). Either is consistent.
        cancelled=$(grep -q 'CANCELLED.*NODE FAILURE' "$LAST_OUT" && echo yes || echo no)
        { [ $cancelled = yes ] && [ "$st" = 75 ]; } || { [ $cancelled = no ] && [ "$st" = 0 ] && [ $same = yes ]; } && ok=0
        verdict $check $ok "node 1 lost (node), srun with $flags: step cancelled on the node failure: $cancelled, status exitCode $st (75 when cancelled: --no-kill is needed), srun exit $LAST_CODE"
      else
        [ $same = yes ] && [ "$st" = 0 ] && [ $took = yes ] && ok=0
        verdict $check $ok "4 nodes + 1 spare, node 1 lost ($LOSS), srun with $flags: srun exit $LAST_CODE, status exitCode $st, spare took over: $took, checksum = serial: $same"
      fi
      ;;
    shrink)
      LOSS=tasks
      run_case shrink 4 0 1
      ok=1; checksum_ok "$LAST_OUT" && [ "$(status_code "$LAST_STATUS")" = 0 ] && ok=0
      verdict shrink $ok "4 nodes, no spare, node 1 killed: srun exit $LAST_CODE, status exitCode $(status_code "$LAST_STATUS"), checksum = serial: $(checksum_ok "$LAST_OUT" && echo yes || echo no)"
      ;;
    none)
      LOSS=tasks
      # Two nodes: one working node left is not enough, the run stops with 76; the README loop runs srun again on what is left.
      run_case none 2 0 1
      first=$LAST_CODE; firststatus=$(status_code "$LAST_STATUS")
      echo "  the README loop: status says $firststatus, so run again (it resumes)"
      rm -f "$LAST_STATUS"
      run_case none 2 0
      ok=1; [ "$firststatus" = 76 ] && checksum_ok "$LAST_OUT" && [ "$(status_code "$LAST_STATUS")" = 0 ] && grep -q 'resum' "$LAST_OUT" && ok=0
      verdict none $ok "2 nodes, node 1 killed: srun exit $first, status exitCode $firststatus; again: srun exit $LAST_CODE, status $(status_code "$LAST_STATUS"), resumed: $(grep -qi 'resum' "$LAST_OUT" && echo yes || echo no), checksum = serial: $(checksum_ok "$LAST_OUT" && echo yes || echo no)"
      ;;
    sbatch|sbatch-node)
      # README's batch script shape (#SBATCH --no-kill, srun with its flags, the loop reading the status file) on 2 nodes
      # without a spare: node 1's tasks killed in the first attempt leave one working node (76), the loop runs again.
      dir=$T/work/$check; mkdir -p "$dir"
      cat > "$dir/job.sh" <<'JOB'
#!/bin/bash
#SBATCH --nodes=2 --no-kill --output=@DIR@/job.out
status="@DIR@/status.json"
for attempt in 1 2 3 4; do
  rm -f "$status"
  echo "attempt $attempt"
  # --overlap: the step of a dead node stays (22.05) and keeps its CPUs on the nodes left
  # the nodes left (a failed one leaves the job): srun otherwise trusts the batch environment's stale count
  n=$(squeue -h -j "$SLURM_JOB_ID" -o %D)
  SLURM_JOB_NUM_NODES=$n SLURM_NNODES=$n srun --nodes=$n --ntasks-per-node=1 --no-kill --kill-on-bad-exit=0 --overlap @MOLOTOF@ run @REPO@/examples/jacobi/jacobi.ts --n @N@ --iterations @ITER@ \
      --checkpoint every:100 --checkpoint-dir "@DIR@/ckpt-{node}" --rendezvous @RDV@ \
      --status-file "$status" --resume-or-start --log all &
  pid=$!
  # srun may go on waiting for a dead node's tasks after the run ended: the status file says when it did
  while kill -0 $pid 2>/dev/null; do
    grep -q '"ended"' "$status" 2>/dev/null && { sleep 5; kill $pid 2>/dev/null; sleep 2; kill -9 $pid 2>/dev/null; }
    sleep 1
  done
  wait $pid
  code=$?
  echo "srun exit code $code"
  [ -s "$status" ] && code=$(node -p "require('$status').exitCode ?? $code")
  echo "status file exitCode $code"
  case $code in
    0)  echo "script exit 0"; exit 0 ;;
    76) ;;
    75) echo "script exit 75"; exit 75 ;;
    *)  grep -qs '"running"' "$status" && { echo "no supervisor wrote an end: again"; sleep 15; continue; }
        echo "script exit 1"; exit 1 ;;
  esac
done
JOB
      sed -i "s|@DIR@|$dir|g; s|@MOLOTOF@|${MOLOTOF[*]}|; s|@REPO@|$REPO|; s|@N@|$N|; s|@ITER@|$ITER|; s|@RDV@|$SUB.1:$((PORT0 + 100))|" "$dir/job.sh"
      say "sbatch $dir/job.sh"; cat "$dir/job.sh" | sed 's/^/  > /'
      JOBS_STARTED=1
      (cd "$dir" && sbatch --nodelist=mc[0-1] "$dir/job.sh")
      for _ in $(seq 1 600); do grep -q 'checkpoint 2 committed to partner' "$dir/job.out" 2>/dev/null && break; sleep 0.1; done
      LOSS=tasks; [ $check = sbatch-node ] && LOSS=node
      lose_node 1 "$dir/ckpt-"
      timeout 240 bash -c "until grep -q 'script exit' '$dir/job.out' 2>/dev/null; do sleep 0.5; done"
      grep -E 'attempt|srun|status file|lost|checksum|script exit|resum' "$dir/job.out" | grep -v committed | sed 's/^/  | /'
      ok=1; checksum_ok "$dir/job.out" && grep -q 'script exit 0' "$dir/job.out" && grep -q 'status file exitCode 76' "$dir/job.out" && ok=0
      verdict $check $ok "batch script, 2 nodes, node 1 lost ($LOSS): $(grep -E 'srun exit code|status file exitCode|script exit' "$dir/job.out" | tr '\n' ';'), checksum = serial: $(checksum_ok "$dir/job.out" && echo yes || echo no)"
      restore_nodes
      ;;
  esac
done
echo
echo "slurm-check: $FAILED failed"
exit $FAILED
