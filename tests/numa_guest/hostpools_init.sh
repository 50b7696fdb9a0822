#!/bin/sh
# Guest /init for the host agent's cgroup v2 pools (tests/test_host_pools_v2.py). The guest mounts
# cgroup2 with the cpuset controller (the host binds it to v1), runs fake QEMUs
# (/bin/qemu-system-x86_64, tests/numa_guest/fakeqemu.c: vCPU threads `CPU n/TCG` that spin) and
# the static `colosched-agent host run` with scheduler = "ia-rotate" and pools.cgroup = "v2".
# The test parses the lines starting with "HP " (words and key=value pairs) and the blocks between
# "HP-BEGIN name" and "HP-END name". Every wait is bounded, so the script always reaches poweroff.
export PATH=/bin
echo  # the firmware leaves the cursor mid-line
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
CG=/sys/fs/cgroup
AGENT=/bin/colosched-agent
STATE=/run/hp-state.json
finish() {
    echo "HP DONE"
    poweroff -f
}
if ! mount -t cgroup2 none $CG; then
    echo "HP FATAL cgroup2-mount"
    finish
fi
echo "HP kernel release=$(uname -r) controllers=$(tr ' ' , <$CG/cgroup.controllers)"

block() {  # block NAME FILE
    echo "HP-BEGIN $1"
    cat "$2"
    echo "HP-END $1"
}
uptime_cs() {
    read -r up _ </proc/uptime
    UPTIME_CS=$((${up%.*} * 100 + 1${up#*.} - 100))
}
alive() { kill -0 "$1" 2>/dev/null; }

# vm NAME VCPUS: starts a fake QEMU; VM_PID is its pid (its threads are named within 5 s).
vm() {
    qemu-system-x86_64 -name "guest=$1,debug-threads=on" -smp "$2" &
    VM_PID=$!
    n=0
    while [ "$(cat /proc/$VM_PID/task/*/comm | grep -c '^CPU ')" -lt "$2" ] && [ $n -lt 50 ]; do
        usleep 100000
        n=$((n + 1))
    done
}
# vcpu PID I: the tid of vCPU I of PID.
vcpu() {
    for d in /proc/"$1"/task/*; do
        [ "$(cat "$d/comm")" = "CPU $2/TCG" ] && echo "${d##*/}"
    done
}
cg_of() {  # the cgroup2 path of thread $2 of $1
    sed -n 's/^0:://p' "/proc/$1/task/$2/cgroup"
}
allowed() {
    sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/task/$2/status"
}
ran_on() {  # field 39 of the thread's stat (processor), counted after the comm, which has spaces
    s=$(cat "/proc/$1/task/$2/stat")
    s=${s##*) }
    # shellcheck disable=SC2086 # split into fields on purpose
    set -- $s
    shift 36
    echo "$1"
}

# snapshot NAME VM...: every thread of the VMs (cgroup, CPUs allowed), the subtree_control and
# type of every group on their paths, and every colosched-host-* group, as block NAME.
snapshot() {
    name=$1
    shift
    {
        for pair in "$@"; do
            pid=${pair#*=}
            for d in /proc/"$pid"/task/*; do
                tid=${d##*/}
                echo "thread ${pair%=*}/$(tr ' ' _ <"$d/comm") tid=$tid cg=$(cg_of "$pid" "$tid") allowed=$(allowed "$pid" "$tid")"
            done
        done
        for g in $DIRS; do
            # The root has no cgroup.type: "none".
            type=none
            [ -e "$CG$g/cgroup.type" ] && type=$(tr ' ' _ <"$CG$g/cgroup.type")
            echo "group $g sc=[$(cat "$CG$g/cgroup.subtree_control")] type=$type"
        done
        echo "pools $(find $CG -type d -name 'colosched-host-*' | sort | tr '\n' ' ')"
    } >"/run/$name.snap"
    block "$name" "/run/$name.snap"
}

# during SCENE VM...: with the agent stopped (SIGSTOP: the placement holds still), each vCPU thread's
# group, that group's effective CPUs, its allowed CPUs and the CPU it last ran on (after 1 s of
# spinning there), and each main thread's group and CPUs: lines "HP vcpu ..." and "HP main ...".
during() {
    scene=$1
    shift
    kill -STOP "$agent"
    sleep 1
    for pair in "$@"; do
        pid=${pair#*=}
        for d in /proc/"$pid"/task/*; do
            tid=${d##*/}
            cg=$(cg_of "$pid" "$tid")
            case "$(cat "$d/comm")" in
                CPU*) echo "HP vcpu scene=$scene vm=${pair%=*} tid=$tid cg=$cg eff=$(cat "$CG$cg/cpuset.cpus.effective")" \
                    "allowed=$(allowed "$pid" "$tid") ran=$(ran_on "$pid" "$tid")" ;;
                *) echo "HP main scene=$scene vm=${pair%=*} tid=$tid cg=$cg allowed=$(allowed "$pid" "$tid")" ;;
            esac
        done
    done
    kill -CONT "$agent"
}

# config VM...: the agent's host.toml for the named VMs.
config() {
    {
        printf '%s\n' 'scheduler = "ia-rotate"' "state_file = \"$STATE\"" 'rediscover_windows = 2' \
            '[paths]' "cgroup2_root = \"$CG\"" \
            '[pools]' 'cgroup = "v2"' 'nsvm_slice_ms = 0' 'nnvm_slice_ms = 0' \
            '[classes]' 'fast = "0-1"' 'slow = "2-3"' 'sf_fast = 1.5'
        for v in "$@"; do printf '[[vm]]\nname = "%s"\n' "$v"; done
    } >/run/host.toml
}

# in_pools VM...: true when every vCPU thread of the VMs is in a colosched-host-* group.
in_pools() {
    for pair in "$@"; do
        pid=${pair#*=}
        for d in /proc/"$pid"/task/*; do
            case "$(cat "$d/comm")" in
                CPU*) cg_of "$pid" "${d##*/}" | grep -q '/colosched-host-cpu[0-9]*$' || return 1 ;;
            esac
        done
    done
}

# run_agent NAME VM...: starts the agent for the VMs and waits (at most 30 s) until each vCPU
# thread is in a pool and 1 s more (windows of 100 ms); then the "during" lines.
run_agent() {
    name=$1
    shift
    names=""
    for pair in "$@"; do names="$names ${pair%=*}"; done
    # shellcheck disable=SC2086 # one argument per VM name
    config $names
    uptime_cs
    t0=$UPTIME_CS
    $AGENT host run --config /run/host.toml --decision-log "/run/$name.jsonl" >"/run/$name.out" 2>&1 &
    agent=$!
    n=0
    while ! in_pools "$@" && alive $agent && [ $n -lt 300 ]; do
        usleep 100000
        n=$((n + 1))
    done
    uptime_cs
    placed_cs=$((UPTIME_CS - t0))
    sleep 1
    if alive $agent; then alive_before=yes; else alive_before=no; fi
    during "$name" "$@"
}

# stop_agent NAME SIG: SIGTERM, or SIGKILL then `restore`; the result line.
stop_agent() {
    kill -"$2" $agent
    n=0
    while alive $agent && [ $n -lt 200 ]; do
        usleep 100000
        n=$((n + 1))
    done
    alive $agent && kill -KILL $agent
    wait $agent
    rc=$?
    restore_rc=none
    if [ "$2" = KILL ]; then
        timeout 30 $AGENT host restore --state-file $STATE >"/run/restore-$1.out" 2>&1
        restore_rc=$?
        block "restore-$1" "/run/restore-$1.out"
    fi
    if [ -e $STATE ]; then state_left=yes; else state_left=no; fi
    echo "HP result name=$1 signal=$2 agent_rc=$rc restore_rc=$restore_rc placed_cs=$placed_cs" \
        "alive_before_signal=$alive_before state_left=$state_left windows=$(wc -l <"/run/$1.jsonl")"
    block "agent-$1" "/run/$1.out"
    head -n 1 "/run/$1.jsonl" >"/run/$1.first"
    block "first-window-$1" "/run/$1.first"
}

# --- (1) SIGTERM: VM a in its own group /vms/a (a systemd scope), VM r in the root cgroup,
# VM c in /vms/c exits mid-run. Nothing has cpuset enabled: the agent must enable it from the root
# down, and take it out again.
mkdir -p $CG/vms/a $CG/vms/c
vm a 2
A=$VM_PID
echo $A >$CG/vms/a/cgroup.procs
vm r 2
R=$VM_PID
vm c 1
C=$VM_PID
echo $C >$CG/vms/c/cgroup.procs
DIRS="/ /vms /vms/a /vms/c"
snapshot before-term a=$A r=$R c=$C
run_agent term a=$A r=$R c=$C
# VM c exits: its groups must go (else its manager could not remove /vms/c).
kill -KILL $C
n=0
while [ -n "$(find $CG/vms/c -type d -name 'colosched-host-*')" ] && [ $n -lt 100 ]; do
    usleep 100000
    n=$((n + 1))
done
c_left=$(find $CG/vms/c -type d -name 'colosched-host-*' | wc -l)
if rmdir $CG/vms/c; then c_rmdir=0; else c_rmdir=1; fi
echo "HP gone vm=c pools_left=$c_left rmdir_rc=$c_rmdir waited_ds=$n"
DIRS="/ /vms /vms/a"
stop_agent term TERM
snapshot after-term a=$A r=$R

# --- (2) SIGKILL + restore: VM b as libvirt makes it (cpuset on from the root to its group, which
# is the threaded domain: main thread in b/emu, vCPU n in b/vcpu<n>, both threaded), beside VM a.
vm b 2
B=$VM_PID
mkdir -p $CG/lv/b
echo +cpuset >$CG/cgroup.subtree_control
echo +cpuset >$CG/lv/cgroup.subtree_control
echo $B >$CG/lv/b/cgroup.procs
echo +cpuset >$CG/lv/b/cgroup.subtree_control
for g in emu vcpu0 vcpu1; do
    mkdir $CG/lv/b/$g
    echo threaded >$CG/lv/b/$g/cgroup.type
done
echo $B >$CG/lv/b/emu/cgroup.threads
vcpu $B 0 >$CG/lv/b/vcpu0/cgroup.threads
vcpu $B 1 >$CG/lv/b/vcpu1/cgroup.threads
DIRS="/ /vms /vms/a /lv /lv/b /lv/b/emu /lv/b/vcpu0 /lv/b/vcpu1"
snapshot before-kill a=$A b=$B
run_agent kill a=$A b=$B
stop_agent kill KILL
snapshot after-kill a=$A b=$B
finish
