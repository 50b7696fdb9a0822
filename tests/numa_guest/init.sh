#!/bin/sh
# Guest /init for the agent's end-to-end test. tests/test_agent_numa_guest.py parses the lines that
# start with "E2E " (key=value pairs) and the blocks between "E2E-BEGIN name" and "E2E-END name".
# Every wait below is bounded, and the script always ends in `poweroff -f`.
export PATH=/bin
echo  # the firmware leaves the cursor mid-line: start the guest's lines on a fresh one
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
# BE hogs go into a cgroup v1 cpuacct group: the agent selects them by it, and its busy sensor reads
# their per-CPU time from cpuacct.usage_percpu (exact, where last-CPU attribution of unpinned
# threads that hop between nodes is not).
mount -t tmpfs cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/cpuacct
mount -t cgroup -o cpuacct cpuacct /sys/fs/cgroup/cpuacct
mkdir -p /sys/fs/cgroup/cpuacct/be

AGENT=colosched-agent
CONF=/etc/colosched/agent.toml
STATE=/run/agent-state.json
INTERVAL=1          # = interval_s in agent.toml: one poll per agent cycle
MAX_INTERVALS=8     # BE must have left node 2 after at most this many cycles

finish() {
    echo "E2E DONE"
    poweroff -f
}

# Helpers set variables instead of printing: under TCG, with the hogs holding every vCPU, each fork
# costs tens of milliseconds, and the polling loop must keep pace with the agent's 1 s cycles.

# UPTIME_CS: time since boot in centiseconds (/proc/uptime always has two decimals).
uptime_cs() {
    read -r up _ </proc/uptime
    UPTIME_CS=$(( ${up%.*} * 100 + 1${up#*.} - 100 ))
}

# CPUS: the CPUs of list $1, each with a space either side ("0-1,3" -> " 0  1  3 ").
cpus_of() {
    CPUS=""
    old_ifs=$IFS
    IFS=,
    for part in $1; do
        a=${part%-*}
        b=${part#*-}
        while [ "$a" -le "$b" ]; do
            CPUS="$CPUS $a "
            a=$((a + 1))
        done
    done
    IFS=$old_ifs
}

# MASK: the affinity (Cpus_allowed_list) of pid $1, "" if it is gone.
mask_of() {
    MASK=""
    while read -r key value; do
        [ "$key" = "Cpus_allowed_list:" ] && MASK=$value
    done 2>/dev/null <"/proc/$1/status"
}

# True if CPU list $1 shares a CPU with node 2.
touches_node2() {
    cpus_of "$1"
    for c in $CPUS; do
        case "$NODE2_CPUS" in *" $c "*) return 0 ;; esac
    done
    return 1
}

mask() { mask_of "$1"; echo "$MASK"; }

# Polls pid $1's mask 4 times a second until it leaves node 2, for at most MAX_INTERVALS
# intervals; MASK is its mask then.
wait_off_node2() {
    n=0
    mask_of "$1"
    while touches_node2 "$MASK" && [ $n -lt $((MAX_INTERVALS * 4)) ]; do
        usleep 250000
        n=$((n + 1))
        mask_of "$1"
    done
}

# NODE2_BUSY, NODE2_ALL: node 2's busy and total ticks in /proc/stat (user..steal, like the agent).
node2_ticks() {
    NODE2_BUSY=0
    NODE2_ALL=0
    while read -r name user nice system idle iowait irq softirq steal _; do
        case "$NODE2_CPUS" in *" ${name#cpu} "*) ;; *) continue ;; esac
        NODE2_BUSY=$((NODE2_BUSY + user + nice + system + irq + softirq))
        NODE2_ALL=$((NODE2_ALL + user + nice + system + idle + iowait + irq + softirq + steal))
    done </proc/stat
}

# TASK_TICKS: utime + stime of pid $1 (its comm has no spaces: the hogs are all `sh`).
task_ticks() {
    read -r line <"/proc/$1/stat"
    # shellcheck disable=SC2086 # split into the stat fields, on purpose
    set -- $line
    TASK_TICKS=$((${14} + ${15}))
}

# A live (not zombie) process.
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

# stop_agent PID: SIGTERM, a bounded wait (10 s), then SIGKILL; RC is its exit status.
stop_agent() {
    kill -TERM "$1"
    n=0
    while alive "$1" && [ $n -lt 100 ]; do
        usleep 100000
        n=$((n + 1))
    done
    alive "$1" && kill -KILL "$1"
    wait "$1"
    RC=$?
}

block() {  # block NAME FILE: the file's content between markers
    echo "E2E-BEGIN $1"
    cat "$2" 2>/dev/null
    echo "E2E-END $1"
}

be_masks() {  # one line per BE hog with its current affinity
    for p in $BE; do
        mask_of "$p"
        echo "E2E $1 be pid=$p mask=$MASK"
    done
}

all_be_have_mask() {
    for p in $BE; do
        mask_of "$p"
        [ "$MASK" = "$1" ] || return 1
    done
    return 0
}

# --- the machine ---------------------------------------------------------------------------------
nodes=0
for _ in /sys/devices/system/node/node[0-9]*; do nodes=$((nodes + 1)); done
ALL=$(cat /sys/devices/system/cpu/online)
echo "E2E machine nodes=$nodes all_cpus=$ALL"
for d in /sys/devices/system/node/node[0-9]*; do
    echo "E2E node id=${d##*node} cpus=$(cat "$d/cpulist")"
done
if [ "$nodes" -ne 4 ] || ! command -v "$AGENT" >/dev/null; then
    echo "E2E abort reason=need-4-nodes-and-the-agent"
    finish
fi
NODE2=$(cat /sys/devices/system/node/node2/cpulist)
cpus_of "$NODE2"
NODE2_CPUS=$CPUS

# --- the workload: one LC hog pinned to node 2, three unpinned BE hogs ----------------------------
taskset -c "$NODE2" sh -c 'while :; do :; done' &
lc=$!
: >/run/be.pids
for _ in 1 2 3; do
    sh -c 'while :; do :; done' &
    echo $! >>/run/be.pids
    echo $! >/sys/fs/cgroup/cpuacct/be/cgroup.procs
done
BE=$(cat /run/be.pids)
# This shell and the agent (which inherits it) run above the hogs, as a node's daemons would: else
# the starved shell, not the agent, would set how many intervals the moves seem to take.
renice -n -10 -p $$ >/dev/null
sleep 1
# For diagnosis only: the guest's clocks over 2 s. Under TCG a vCPU thread the host does not run
# loses timer ticks, so /proc/stat's per-CPU ticks can fall short of the wall clock, while a task's
# own CPU time (from sched_clock) does not. USER_HZ is 100: ticks and centiseconds are one unit.
uptime_cs
c0=$UPTIME_CS
node2_ticks
b0=$NODE2_BUSY
a0=$NODE2_ALL
task_ticks $lc
l0=$TASK_TICKS
sleep 2
uptime_cs
node2_ticks
task_ticks $lc
echo "E2E clocks wall_cs=$((UPTIME_CS - c0)) node2_busy_ticks=$((NODE2_BUSY - b0))" \
    "node2_all_ticks=$((NODE2_ALL - a0)) lc_task_ticks=$((TASK_TICKS - l0))"
echo "E2E workload lc_pid=$lc lc_mask=$(mask $lc) be_pids=$(tr '\n' ',' </run/be.pids)"
be_masks start

# --- (a) check-config and one plan ---------------------------------------------------------------
timeout 20 $AGENT check-config --config $CONF >/run/check.out 2>&1
echo "E2E check_config rc=$?"
block check-config /run/check.out
timeout 30 $AGENT plan --once --config $CONF --json >/run/plan.json 2>/run/plan.err
echo "E2E plan rc=$?"
block plan /run/plan.json
block plan-stderr /run/plan.err

# --- (b) coarse, then SIGTERM; (c) fine, then SIGKILL + restore ---------------------------------
# scenario POLICY SIGNAL [crowd]: with `crowd`, every BE hog starts pinned to node 2 beside the LC
# hog (so that more BE load is there than one receiver may take: fine must use two, whatever
# the kernel's own placement of unpinned hogs), and the restore must give that mask back.
scenario() {
    policy=$1
    sig=$2
    log=/run/decisions-$policy.jsonl
    if ! all_be_have_mask "$ALL"; then
        # A previous scenario failed to restore; start this one from the original masks anyway.
        echo "E2E $policy reset masks_before=not-original"
        for p in $BE; do taskset -p -c "$ALL" "$p" >/dev/null; done
    fi
    start_mask=$ALL
    if [ "${3:-}" = crowd ]; then
        start_mask=$NODE2
        for p in $BE; do taskset -p -c "$NODE2" "$p" >/dev/null; done
        be_masks "$policy-start"
    fi
    uptime_cs
    t0=$UPTIME_CS
    $AGENT run --config $CONF --policy "$policy" --decision-log "$log" >"/run/agent-$policy.out" 2>&1 &
    agent=$!
    # Poll 4 times per interval until no BE hog may run on node 2, for at most MAX_INTERVALS
    # intervals after the agent's start; moved = the intervals that took, rounded up.
    moved=never
    deadline=$((t0 + MAX_INTERVALS * INTERVAL * 100))
    while [ "$UPTIME_CS" -le $deadline ]; do
        usleep $((INTERVAL * 250000))
        uptime_cs
        off=yes
        for p in $BE; do
            mask_of "$p"
            touches_node2 "$MASK" && off=no
        done
        if [ $off = yes ]; then
            moved=$(((UPTIME_CS - t0 + INTERVAL * 100 - 1) / (INTERVAL * 100)))
            break
        fi
    done
    be_masks "$policy"
    echo "E2E $policy lc mask=$(mask $lc)"
    if alive $agent; then alive_before=yes; else alive_before=no; fi
    kill -"$sig" $agent
    # Bounded wait for the exit: a hung agent is reported, then killed.
    n=0
    while alive $agent && [ $n -lt 100 ]; do
        usleep 100000
        n=$((n + 1))
    done
    if alive $agent; then
        echo "E2E $policy hung signal=$sig"
        kill -KILL $agent
    fi
    wait $agent
    rc=$?
    restore_rc=none
    if [ "$sig" = KILL ]; then
        timeout 30 $AGENT restore --state-file $STATE >"/run/restore-$policy.out" 2>&1
        restore_rc=$?
        block "restore-$policy" "/run/restore-$policy.out"
    fi
    if all_be_have_mask "$start_mask"; then restored=yes; else restored=no; fi
    be_masks "$policy-after"
    uptime_cs
    echo "E2E $policy moved_after_intervals=$moved restored=$restored alive_before_signal=$alive_before" \
        "signal=$sig agent_rc=$rc restore_rc=$restore_rc centiseconds=$((UPTIME_CS - t0))"
    block "agent-$policy" "/run/agent-$policy.out"
    block "decisions-$policy" "$log"
    # The next scenarios start from the original masks.
    for p in $BE; do taskset -p -c "$ALL" "$p" >/dev/null; done
}

# --- (d) the thesis's all-OS mode: every user task, IRQ and unbound workqueue ------------------
# At start everything goes to node 0 (Algorithm 3-1, line 1); SIGTERM must put every IRQ
# affinity, workqueue cpumask and task mask back.
irq_masks() {  # IRQS: " irq=list" for every IRQ, on one line
    IRQS=""
    for f in /proc/irq/*/smp_affinity_list; do
        n=${f#/proc/irq/}
        IRQS="$IRQS ${n%%/*}=$(cat "$f")"
    done
}
all_os_scenario() {
    wq=/sys/devices/virtual/workqueue/writeback/cpumask
    printf '%s\n' 'interval_s = 1.0' 'policy = "coarse"' 'state_file = "/run/agent-all-state.json"' \
        '[sensor]' 'kind = "busy"' 'threshold = 0.5' 'hysteresis = 1' \
        '[actuator]' 'all_os_activities = true' >/run/agent-all.toml
    irq_masks
    irqs_before=$IRQS
    wq_before=$(cat $wq)
    $AGENT run --config /run/agent-all.toml >/run/agent-allos.out 2>&1 &
    agent=$!
    sleep 2
    irq_masks
    irqs_during=$IRQS
    wq_during=$(cat $wq)
    lc_during=$(mask $lc)
    stop_agent $agent
    rc=$RC
    irq_masks
    if [ "$IRQS" = "$irqs_before" ]; then irqs_restored=yes; else irqs_restored=no; fi
    if all_be_have_mask "$ALL"; then tasks_restored=yes; else tasks_restored=no; fi
    changed=0
    for pair in $irqs_during; do
        case " $irqs_before " in *" $pair "*) ;; *) changed=$((changed + 1)) ;; esac
    done
    echo "E2E allos agent_rc=$rc wq_before=$wq_before wq_during=$wq_during wq_after=$(cat $wq)" \
        "irqs_changed=$changed irqs_restored=$irqs_restored tasks_restored=$tasks_restored" \
        "lc_during=$lc_during lc_after=$(mask $lc)"
    echo "E2E allos-irqs during:$irqs_during"
    block agent-allos /run/agent-allos.out
}

# --- (e) memory follows: migrate_memory moves a BE task's pages to its new node -----------------
# NODE_PAGES: " N0=a N1=b N2=c N3=d", pid $1's resident pages per node summed over numa_maps.
node_pages() {
    n0=0 n1=0 n2=0 n3=0
    while read -r line; do
        for w in $line; do
            case $w in
                N0=*) n0=$((n0 + ${w#N0=})) ;;
                N1=*) n1=$((n1 + ${w#N1=})) ;;
                N2=*) n2=$((n2 + ${w#N2=})) ;;
                N3=*) n3=$((n3 + ${w#N3=})) ;;
            esac
        done
    done 2>/dev/null <"/proc/$1/numa_maps"
    NODE_PAGES=" N0=$n0 N1=$n1 N2=$n2 N3=$n3"
}
migrate_scenario() {
    # The earlier BE hogs would load every other node; this scenario has one BE task of its own.
    for p in $BE; do kill -KILL "$p"; done
    mkdir -p /sys/fs/cgroup/cpuacct/bemem
    # A BE task pinned to node 2 fills 4 MiB of heap there (first touch is local), says so, then
    # spins, at nice 0 like the LC hog (this shell runs at -10). It takes half of node 2's CPU from
    # the LC hog: hence threshold 0.3 below.
    # shellcheck disable=SC2016 # the inner shell expands it, on purpose
    taskset -c "$NODE2" sh -c 'x=$(head -c 4194304 /dev/zero | tr "\0" a); : >/run/mem.ready; while :; do :; done' &
    mem=$!
    renice -n 10 -p $mem >/dev/null  # busybox renice -n adds: -10 + 10
    echo $mem >/sys/fs/cgroup/cpuacct/bemem/cgroup.procs
    n=0
    while [ ! -e /run/mem.ready ] && [ $n -lt 240 ]; do
        usleep 250000
        n=$((n + 1))
    done
    node_pages $mem
    before=$NODE_PAGES
    printf '%s\n' 'interval_s = 1.0' 'policy = "coarse"' 'state_file = "/run/agent-mem-state.json"' \
        '[sensor]' 'kind = "busy"' 'threshold = 0.3' 'hysteresis = 1' \
        '[be]' 'cgroups = ["/sys/fs/cgroup/cpuacct/bemem"]' \
        '[limits]' 'warning_threshold = 1.0' '[actuator]' 'migrate_memory = true' >/run/agent-mem.toml
    $AGENT run --config /run/agent-mem.toml --decision-log /run/decisions-mem.jsonl >/run/agent-mem.out 2>&1 &
    agent=$!
    wait_off_node2 $mem
    moved_mask=$MASK
    # The pages move right after the mask, in the same cycle, whose decision line comes after both
    # (under TCG migrating 4 MiB takes seconds).
    n=0
    while ! grep -q '"moved":\[{' /run/decisions-mem.jsonl 2>/dev/null && [ $n -lt 120 ]; do
        usleep 250000
        n=$((n + 1))
    done
    node_pages $mem
    after=$NODE_PAGES
    kill -TERM $agent
    wait $agent
    rc=$?
    mask_of $mem
    echo "E2E migrate moved_mask=$moved_mask restored_mask=$MASK agent_rc=$rc"
    echo "E2E migrate-pages before$before"
    echo "E2E migrate-pages after$after"
    block agent-mem /run/agent-mem.out
    block decisions-mem /run/decisions-mem.jsonl
    kill -KILL $mem
}

# --- (f) CPU hotplug: a node whose CPUs went offline is never a target; restore keeps offline CPUs
hotplug_scenario() {
    : >/run/be.pids
    for _ in 1 2; do
        sh -c 'while :; do :; done' &
        echo $! >>/run/be.pids
        echo $! >/sys/fs/cgroup/cpuacct/be/cgroup.procs
    done
    BE=$(cat /run/be.pids)
    printf '%s\n' 'interval_s = 1.0' 'policy = "coarse"' 'state_file = "/run/agent-hp-state.json"' \
        '[sensor]' 'kind = "busy"' 'threshold = 0.5' 'hysteresis = 1' \
        '[be]' 'cgroups = ["/sys/fs/cgroup/cpuacct/be"]' '[limits]' 'warning_threshold = 1.0' >/run/agent-hp.toml
    $AGENT run --config /run/agent-hp.toml --decision-log /run/decisions-hp.jsonl >/run/agent-hp.out 2>&1 &
    agent=$!
    wait_off_node2 "${BE%%[!0-9]*}"  # the first BE hog
    be_node=$MASK
    # Offline a node's only CPU that holds no BE (CPU 0 cannot go offline): CPU 1, else CPU 3.
    off=1
    [ "$be_node" = 1 ] && off=3
    echo 0 >/sys/devices/system/cpu/cpu$off/online
    online=$(cat /sys/devices/system/cpu/online)
    sleep 2
    # A new BE hog may run on node 2 (its mask is the shell's): the agent must move it, not onto
    # the offline node (which reads load 0).
    sh -c 'while :; do :; done' &
    new=$!
    echo $new >/sys/fs/cgroup/cpuacct/be/cgroup.procs
    BE="$BE $new"
    wait_off_node2 $new
    new_mask=$MASK
    kill -KILL $agent
    wait $agent
    timeout 30 $AGENT restore --state-file /run/agent-hp-state.json >/run/restore-hp.out 2>&1
    restore_rc=$?
    mask_of $new
    restored_offline=$MASK
    # The kernel may leave an offline CPU out of the mask it is given: what it left out waits in
    # the state file for a second restore once the CPU is back.
    if [ -e /run/agent-hp-state.json ]; then kept=yes; else kept=no; fi
    echo 1 >/sys/devices/system/cpu/cpu$off/online
    timeout 30 $AGENT restore --state-file /run/agent-hp-state.json >>/run/restore-hp.out 2>&1
    restore2_rc=$?
    if all_be_have_mask "$ALL"; then restored=yes; else restored=no; fi
    if [ -e /run/agent-hp-state.json ]; then left=yes; else left=no; fi
    echo "E2E hotplug be_node=$be_node offline_cpu=$off online=$online new_mask=$new_mask" \
        "restore_rc=$restore_rc restored_while_offline=$restored_offline state_kept=$kept" \
        "restore2_rc=$restore2_rc restored=$restored state_left=$left"
    be_masks hotplug-after
    block agent-hp /run/agent-hp.out
    block decisions-hp /run/decisions-hp.jsonl
    block restore-hp /run/restore-hp.out
    for p in $BE; do kill -KILL "$p"; done
}

# --- (g) Kubernetes pods on cgroup v2 (issue 30): the kubelet's systemd-driver tree, built here in
# a cgroup2 hierarchy mounted beside the v1 one (a hybrid host: /sys/fs/cgroup/unified), found by
# the agent itself. Two BestEffort pods' hogs must leave node 2; the LC hog, now in a Guaranteed
# pod, is never touched; SIGTERM puts the masks back.
kube_scenario() {
    k=/sys/fs/cgroup/unified/kubepods.slice
    mkdir -p /sys/fs/cgroup/unified
    mount -t cgroup2 none /sys/fs/cgroup/unified
    g=$k/kubepods-podg_1.slice/cri-containerd-c0.scope
    mkdir -p $g
    echo $lc >$g/cgroup.procs
    BE=""
    for i in 1 2; do
        c=$k/kubepods-besteffort.slice/kubepods-besteffort-podb_$i.slice/cri-containerd-c$i.scope
        mkdir -p $c
        sh -c 'while :; do :; done' &
        echo $! >$c/cgroup.procs
        BE="${BE:+$BE }$!"
    done
    echo "E2E kube-workload be_pids=$(echo "$BE" | tr ' ' ',')"
    printf '%s\n' 'interval_s = 1.0' 'policy = "coarse"' 'state_file = "/run/agent-kube-state.json"' \
        '[sensor]' 'kind = "busy"' 'threshold = 0.5' 'hysteresis = 1' '[be]' 'kubernetes = true' \
        >/run/agent-kube.toml
    timeout 20 $AGENT check-config --config /run/agent-kube.toml >/run/check-kube.out 2>&1
    echo "E2E kube-check rc=$?"
    block kube-check /run/check-kube.out
    $AGENT run --config /run/agent-kube.toml --decision-log /run/decisions-kube.jsonl \
        >/run/agent-kube.out 2>&1 &
    agent=$!
    moved=yes
    for p in $BE; do
        wait_off_node2 "$p"
        touches_node2 "$MASK" && moved=no
    done
    be_masks kube
    lc_during=$(mask $lc)
    stop_agent $agent
    rc=$RC
    if all_be_have_mask "$ALL"; then restored=yes; else restored=no; fi
    echo "E2E kube moved=$moved restored=$restored agent_rc=$rc lc_during=$lc_during lc_after=$(mask $lc)"
    block agent-kube /run/agent-kube.out
    block decisions-kube /run/decisions-kube.jsonl
    for p in $BE; do kill -KILL "$p"; done
}

scenario coarse TERM
scenario fine KILL crowd
all_os_scenario
migrate_scenario
hotplug_scenario
kube_scenario
echo "E2E final lc mask=$(mask $lc)"
finish
