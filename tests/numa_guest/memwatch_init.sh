#!/bin/sh
# Guest /init for memwatch on a real cgroup v2 memory controller (tests/test_memwatch_guest.py).
# The static `colosched-agent memwatch` (and the static `memwatch`) watch groups of a cgroup2 mount
# while /bin/memhog (tests/numa_guest/memhog.c) allocates in them. The test parses the lines that
# start with "MW " (words and key=value pairs) and the blocks between "MW-BEGIN name" and
# "MW-END name" (each watch's stdout, one JSON event per line, and its stderr). Every watch runs
# under `timeout`, so the script always reaches `poweroff -f`.
export PATH=/bin
echo  # the firmware leaves the cursor mid-line: start the guest's lines on a fresh one
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
CG=/sys/fs/cgroup
if ! mount -t cgroup2 none "$CG"; then
    echo "MW FATAL cgroup2-mount"
    poweroff -f
fi
echo "MW-BEGIN controllers"
cat "$CG/cgroup.controllers"
echo "MW-END controllers"
echo +memory >"$CG/cgroup.subtree_control"
echo "MW kernel release=$(uname -r)"

WATCH_LIMIT_S=30  # no watch runs longer than this (timeout kills it: exit 124 or 137)

# UPTIME_MS: time since boot in milliseconds (/proc/uptime has two decimals).
uptime_ms() {
    read -r up _ </proc/uptime
    UPTIME_MS=$(( (${up%.*} * 100 + 1${up#*.} - 100) * 10 ))
}

# start_watch NAME PROGRAM ARGS...: runs `PROGRAM ARGS` in the background (stdout in
# /run/NAME.out, stderr in /run/NAME.err) and returns once it said "watching" (at most 10 s);
# WATCH_PID is its pid.
start_watch() {
    name=$1
    shift
    timeout "$WATCH_LIMIT_S" "$@" >"/run/$name.out" 2>"/run/$name.err" &
    WATCH_PID=$!
    i=0
    while ! grep -q "watching" "/run/$name.err" 2>/dev/null && [ $i -lt 100 ]; do
        kill -0 "$WATCH_PID" 2>/dev/null || break
        usleep 100000
        i=$((i + 1))
    done
}

# dump NAME CODE: the watch's stdout and stderr as blocks, and its exit code.
dump() {
    echo "MW-BEGIN $1.out"
    cat "/run/$1.out"
    echo "MW-END $1.out"
    echo "MW-BEGIN $1.err"
    cat "/run/$1.err"
    echo "MW-END $1.err"
    echo "MW exit name=$1 code=$2"
}

# stop_watch NAME: SIGTERM to the watch started last, waits for it, dumps it.
stop_watch() {
    kill -TERM "$WATCH_PID" 2>/dev/null
    wait "$WATCH_PID"
    dump "$1" $?
}

# hog GROUP MIB HOLD_MS: memhog in GROUP (the shell joins it, then becomes memhog); HOG_CODE is
# its exit code (137 when the OOM killer took it).
hog() {
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec memhog "$@"' sh "$@" >/dev/null
    HOG_CODE=$?
}

# 1. Thresholds crossed up and down (v2: memory.current polled every 20 ms; memory.events too).
mkdir "$CG/t"
echo 64M >"$CG/t/memory.max"
start_watch thresholds colosched-agent memwatch --cgroup "$CG/t" --threshold 16M --threshold 50% \
    --period 20 --json
hog "$CG/t" 40 1000
usleep 500000
stop_watch thresholds
echo "MW hog name=thresholds code=$HOG_CODE"

# 2. The same with --backend poll, by memwatch's own static binary.
start_watch poll memwatch --cgroup "$CG/t" --backend poll --threshold 16M --threshold 50% \
    --period 20 --json
hog "$CG/t" 40 1000
usleep 500000
stop_watch poll
echo "MW hog name=poll code=$HOG_CODE"

# 3. memory.high as the soft line, and a PSI trigger on memory.pressure: a hog 1 MiB over the
#    line is reclaimed (in vain: no swap) and throttled, which counts `high` and stalls on memory.
mkdir "$CG/e"
echo 48M >"$CG/e/memory.max"
echo "MW high before=$(cat "$CG/e/memory.high")"
start_watch high colosched-agent memwatch --cgroup "$CG/e" --high 16M --psi "some 50000 1000000" \
    --json
echo "MW high while=$(cat "$CG/e/memory.high")"
uptime_ms
t0=$UPTIME_MS
hog "$CG/e" 17 200
uptime_ms
echo "MW hog name=high code=$HOG_CODE ms=$((UPTIME_MS - t0))"
usleep 1500000
stop_watch high
echo "MW high after=$(cat "$CG/e/memory.high")"

# 4. memory.events max, oom and oom_kill: a hog past memory.max is OOM-killed.
start_watch oom colosched-agent memwatch --cgroup "$CG/e" --json
hog "$CG/e" 80 0
echo "MW hog name=oom code=$HOG_CODE"
usleep 500000
stop_watch oom
echo "MW-BEGIN events.e"
cat "$CG/e/memory.events"
echo "MW-END events.e"

# 5. A percentage of the nearest ancestor's limit (the group has none), and a debounce.
mkdir "$CG/p"
echo 64M >"$CG/p/memory.max"
echo +memory >"$CG/p/cgroup.subtree_control"
mkdir "$CG/p/c"
echo "MW child max=$(cat "$CG/p/c/memory.max")"
start_watch ancestor colosched-agent memwatch --cgroup "$CG/p/c" --threshold 25% --period 20 --json
hog "$CG/p/c" 24 500
usleep 500000
stop_watch ancestor
start_watch debounce colosched-agent memwatch --cgroup "$CG/p/c" --threshold 8M --period 20 \
    --debounce 600ms --json
hog "$CG/p/c" 16 100     # above for ~0.1 s: not reported
usleep 1000000
hog "$CG/p/c" 16 1500    # above for 1.5 s: reported after 0.6 s, and the way down too
usleep 1500000
stop_watch debounce

# 6. The cgroup removed while watched: a `gone` event and exit 0, by itself (no signal).
for kind in poll psi; do
    mkdir "$CG/g$kind"
    if [ $kind = poll ]; then
        start_watch "gone-$kind" colosched-agent memwatch --cgroup "$CG/g$kind" --threshold 1M --json
    else
        start_watch "gone-$kind" colosched-agent memwatch --cgroup "$CG/g$kind" \
            --psi "some 50000 1000000" --json
    fi
    uptime_ms
    t0=$UPTIME_MS
    rmdir "$CG/g$kind"
    wait "$WATCH_PID"
    code=$?
    uptime_ms
    echo "MW gone kind=$kind ms=$((UPTIME_MS - t0))"
    dump "gone-$kind" $code
done

# 7. Bad input: exit 2 with the flag or path named, at once.
mkdir "$CG/n"    # no limit here nor above (the root has no memory.max)
mkdir /run/fake-v1 /run/fake-v2
: >/run/fake-v1/cgroup.event_control
echo 0 >/run/fake-v1/memory.usage_in_bytes
echo 1073741824 >/run/fake-v1/memory.limit_in_bytes
echo 0 >/run/fake-v2/memory.current
echo max >/run/fake-v2/memory.max
printf 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n' >/run/fake-v2/memory.events
bad() {
    name=$1
    shift
    timeout 10 colosched-agent memwatch "$@" >"/run/bad-$name.out" 2>"/run/bad-$name.err"
    code=$?
    echo "MW-BEGIN bad-$name"
    cat "/run/bad-$name.err"
    echo "MW-END bad-$name"
    echo "MW bad name=$name code=$code"
}
bad missing --cgroup "$CG/nope" --threshold 1M
bad suffix --cgroup "$CG/t" --threshold 12Q
bad zero --cgroup "$CG/t" --threshold 0
bad above-limit --cgroup "$CG/t" --threshold 128M
bad no-limit-pct --cgroup "$CG/n" --threshold 80%
bad memsw --cgroup "$CG/t" --threshold 1M --memsw
bad backend-v1 --cgroup "$CG/t" --threshold 1M --backend v1
bad psi-spec --cgroup "$CG/t" --psi "some 1 100"
bad debounce --cgroup "$CG/t" --threshold 1M --debounce 5
bad not-cgroupfs-v1 --cgroup /run/fake-v1 --threshold 1M
bad not-cgroupfs-v2 --cgroup /run/fake-v2 --threshold 1M
echo "MW fake-v1 event_control_bytes=$(wc -c </run/fake-v1/cgroup.event_control)"

echo "MW DONE"
poweroff -f
