#!/bin/sh
# Guest /init for the smoke boot: the guest itself works (no agent needed). Prints SMOKE lines.
export PATH=/bin
echo  # the firmware leaves the cursor mid-line: start the guest's lines on a fresh one
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

nodes=0
for _ in /sys/devices/system/node/node[0-9]*; do nodes=$((nodes + 1)); done
echo "SMOKE machine nodes=$nodes cpus_online=$(cat /sys/devices/system/cpu/online)"
for d in /sys/devices/system/node/node[0-9]*; do
    echo "SMOKE node id=${d##*node} cpus=$(cat "$d/cpulist")"
done

# taskset really pins: a hog started on node 2's CPUs reports exactly that list.
cpus2=$(cat /sys/devices/system/node/node2/cpulist)
taskset -c "$cpus2" sh -c 'while :; do :; done' &
hog=$!
sleep 1
echo "SMOKE taskset want=$cpus2 got=$(sed -n 's/^Cpus_allowed_list:\s*//p' /proc/$hog/status)"
kill $hog
echo "SMOKE DONE"
poweroff -f
