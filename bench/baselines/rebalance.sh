#!/usr/bin/env bash
# rebalance.sh — the thesis's guest rebalancer (Algorithm 3-1), rewritten in plain bash.
#
# THIS IS THE BASELINE, NOT THE PRODUCT. The product is the node agent (crates/agent,
# `colosched-agent`, docs/agent.md). This script exists so bench/agent_perf.py can compare the
# agent's cost and behaviour with what the thesis actually ran: a shell loop that forks `taskset`
# once per process. It is deliberately as naive as the thesis (no hysteresis, no cool-down, no
# state file, no restore), see ../shared/spec/000-giantvm-cluster-scheduler.md §2.1:
#
#   SET_AFFINITY_ALL(node): if node == current: return; pin every task, IRQ and sysfs workqueue
#                           to node's CPUs; current <- node
#   MAIN: SET_AFFINITY_ALL(node0); loop { sleep INTERVAL; steal[n] <- steal ticks of node n over
#         the interval; if steal[current] < THRESHOLD: continue; SET_AFFINITY_ALL(argmin steal) }
#
# Steal per node is the SUM over the node's CPUs of field 8 of the `cpuN` lines of /proc/stat
# (USER_HZ ticks); the thesis does not say sum or mean (spec open question 11), sum matches its
# "50 ticks per 2 s" threshold on one-vCPU-per-host test nodes.
#
# Environment (all optional):
#   INTERVAL=2           seconds between samples (thesis: 2)
#   THRESHOLD=50         steal ticks per interval on the current node that trigger a move
#   PSEUDO_NODES="0;1"   node CPU lists separated by ';' (default: NUMA nodes from sysfs)
#   SYSFS=/sys           sysfs root (node cpulists, workqueue cpumasks)
#   STAT_FILE=/proc/stat where steal is read (tests point it at a fake file)
#   PIDS_FILE=           restrict SET_AFFINITY_ALL to the pids listed (one per line) and leave
#                        IRQs and workqueues alone; without it EVERY process, IRQ and workqueue
#                        of the machine is pinned, as in the thesis
#   BOOT_NODE=0          MAIN line 1 (pin everything to this node at start); "" skips it
#   FORCE_TARGET=        do exactly one SET_AFFINITY_ALL(FORCE_TARGET), unconditionally, and exit
#                        (the benchmark uses it to time one full move of all listed pids)
#   CYCLES=0             stop after this many samples (0 = loop forever, as the thesis)
#   ONCE=0               1 = the same as CYCLES=1 (one sample, at most one move, exit)
#   DRY_RUN=0            1 = print the commands instead of running them
#   VERBOSE=0            1 = log every sample to stderr
#
# Exit status: 0 ok, 2 bad configuration. Failures to pin single tasks (a process that exited,
# a kernel thread that refuses) are counted and reported, not fatal: the thesis ignores them too.

set -u

INTERVAL=${INTERVAL:-2}
THRESHOLD=${THRESHOLD:-50}
PSEUDO_NODES=${PSEUDO_NODES:-}
SYSFS=${SYSFS:-/sys}
STAT_FILE=${STAT_FILE:-/proc/stat}
PIDS_FILE=${PIDS_FILE:-}
BOOT_NODE=${BOOT_NODE-0}
FORCE_TARGET=${FORCE_TARGET:-}
CYCLES=${CYCLES:-0}
[ "${ONCE:-0}" = 1 ] && CYCLES=1
DRY_RUN=${DRY_RUN:-0}
VERBOSE=${VERBOSE:-0}

log() { printf 'rebalance: %s\n' "$*" >&2; }
die() {
    log "$*"
    exit 2
}

# --- topology -----------------------------------------------------------------------------
NODE_CPUS=() # NODE_CPUS[n] = cpulist of node n, as the kernel writes it ("0-3,8")
if [ -n "$PSEUDO_NODES" ]; then
    IFS=';' read -r -a NODE_CPUS <<<"$PSEUDO_NODES"
else
    for d in "$SYSFS"/devices/system/node/node[0-9]*; do
        [ -r "$d/cpulist" ] || continue
        n=${d##*/node}
        read -r "NODE_CPUS[n]" <"$d/cpulist"
    done
fi
[ "${#NODE_CPUS[@]}" -gt 0 ] || die "no nodes (set PSEUDO_NODES or check $SYSFS/devices/system/node)"
for n in "${!NODE_CPUS[@]}"; do
    [[ ${NODE_CPUS[n]} =~ ^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$ ]] ||
        die "node $n: bad cpulist '${NODE_CPUS[n]}'"
done
if [ -n "$FORCE_TARGET" ] && [ -z "${NODE_CPUS[FORCE_TARGET]+x}" ]; then
    die "FORCE_TARGET=$FORCE_TARGET is not a node (nodes: ${!NODE_CPUS[*]})"
fi
if [ -n "$PIDS_FILE" ] && [ ! -r "$PIDS_FILE" ]; then
    die "PIDS_FILE=$PIDS_FILE is not readable"
fi

# CPU_NODE[c] = node of CPU c, so one pass over /proc/stat sums steal per node.
CPU_NODE=()
for n in "${!NODE_CPUS[@]}"; do
    IFS=',' read -r -a ranges <<<"${NODE_CPUS[n]}"
    for r in "${ranges[@]}"; do
        lo=${r%-*}
        hi=${r#*-}
        for ((c = lo; c <= hi; c++)); do CPU_NODE[c]=$n; done
    done
done

# The mask form of a cpulist, for sysfs workqueue cpumask files (they take hex, not lists).
cpulist_to_mask() {
    local mask=0 r lo hi c ranges
    IFS=',' read -r -a ranges <<<"$1"
    for r in "${ranges[@]}"; do
        lo=${r%-*}
        hi=${r#*-}
        for ((c = lo; c <= hi; c++)); do mask=$((mask | (1 << c))); done
    done
    printf '%x' "$mask"
}

exec 3>&1 # DRY_RUN prints here: the callers send taskset's own chatter to /dev/null
run() {
    if [ "$DRY_RUN" = 1 ]; then
        printf '%s\n' "$*" >&3
    else
        "$@"
    fi
}

# --- SET_AFFINITY_ALL ---------------------------------------------------------------------
CURRENT_NODE=""

set_affinity_all() {
    local node=$1 force=${2:-0} cpus pid ok=0 failed=0 irq wq mask
    if [ "$force" != 1 ] && [ "$node" = "$CURRENT_NODE" ]; then return 0; fi
    cpus=${NODE_CPUS[node]}
    if [ -n "$PIDS_FILE" ]; then
        # Benchmark mode: only the listed (best-effort) processes, all their threads (-a).
        while read -r pid; do
            [ -n "$pid" ] || continue
            if run taskset -a -p -c "$cpus" "$pid" >/dev/null 2>&1; then
                ok=$((ok + 1))
            else
                failed=$((failed + 1))
            fi
        done <"$PIDS_FILE"
    else
        # Thesis mode: every process (taskset -a covers its threads) ...
        for d in /proc/[0-9]*; do
            pid=${d#/proc/}
            [ "$pid" = "$$" ] && continue # pin ourselves last (below), not mid-walk
            if run taskset -a -p -c "$cpus" "$pid" >/dev/null 2>&1; then
                ok=$((ok + 1))
            else
                failed=$((failed + 1)) # kernel threads such as ksoftirqd/N refuse, as the thesis says
            fi
        done
        run taskset -a -p -c "$cpus" "$$" >/dev/null 2>&1 || true
        # ... every IRQ (the thesis stops irqbalance first, else it undoes this) ...
        for irq in /proc/irq/[0-9]*; do
            [ -w "$irq/smp_affinity_list" ] || continue
            if [ "$DRY_RUN" = 1 ]; then
                printf 'echo %s > %s\n' "$cpus" "$irq/smp_affinity_list"
            else
                echo "$cpus" 2>/dev/null >"$irq/smp_affinity_list" || failed=$((failed + 1))
            fi
        done
        # ... and every workqueue created with WQ_SYSFS.
        mask=$(cpulist_to_mask "$cpus")
        for wq in "$SYSFS"/devices/virtual/workqueue/*/cpumask; do
            [ -w "$wq" ] || continue
            if [ "$DRY_RUN" = 1 ]; then
                printf 'echo %s > %s\n' "$mask" "$wq"
            else
                echo "$mask" 2>/dev/null >"$wq" || failed=$((failed + 1))
            fi
        done
    fi
    log "moved to node $node (cpus $cpus): $ok processes pinned, $failed failures"
    CURRENT_NODE=$node
}

# --- steal sampling -----------------------------------------------------------------------
STEAL=() # STEAL[n] = cumulative steal ticks of node n at the last sample

sample_steal() {
    local name user nice system idle iowait irq softirq steal rest c n
    STEAL=()
    for n in "${!NODE_CPUS[@]}"; do STEAL[n]=0; done
    while read -r name user nice system idle iowait irq softirq steal rest; do
        case $name in
        cpu[0-9]*)
            c=${name#cpu}
            n=${CPU_NODE[c]:-}
            [ -n "$n" ] && STEAL[n]=$((STEAL[n] + ${steal:-0}))
            ;;
        intr) break ;; # the cpuN lines are over; skip the long tail of the file
        esac
    done <"$STAT_FILE"
    : "$user$nice$system$idle$iowait$irq$softirq$rest" # fields named for readability only
}

# --- MAIN ---------------------------------------------------------------------------------
if [ -n "$FORCE_TARGET" ]; then
    set_affinity_all "$FORCE_TARGET" 1
    exit 0
fi

[ -n "$BOOT_NODE" ] && set_affinity_all "$BOOT_NODE" 1
[ -n "$CURRENT_NODE" ] || CURRENT_NODE=0 # BOOT_NODE="": assume the boot node without pinning

sample_steal
PREV=("${STEAL[@]}")
cycle=0
while [ "$CYCLES" = 0 ] || [ "$cycle" -lt "$CYCLES" ]; do
    cycle=$((cycle + 1))
    sleep "$INTERVAL"
    sample_steal
    target=""
    best=""
    delta_cur=0
    deltas=""
    for n in "${!NODE_CPUS[@]}"; do
        d=$((STEAL[n] - PREV[n]))
        deltas="$deltas $n:$d"
        [ "$n" = "$CURRENT_NODE" ] && delta_cur=$d
        # argmin, lowest node id on ties (the thesis does not say; first is the natural reading)
        if [ -z "$best" ] || [ "$d" -lt "$best" ]; then
            best=$d
            target=$n
        fi
    done
    PREV=("${STEAL[@]}")
    [ "$VERBOSE" = 1 ] && log "cycle $cycle: steal$deltas (current node $CURRENT_NODE)"
    [ "$delta_cur" -lt "$THRESHOLD" ] && continue
    set_affinity_all "$target"
done
