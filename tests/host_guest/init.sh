#!/bin/sh
# Guest /init of a host_guest scene: eth0 up at $HG_IP (given on the kernel command line, which hands
# unknown NAME=value words to init's environment), then guestd, the traffic end. Prints HG lines.
export PATH=/bin
echo  # the firmware leaves the cursor mid-line: start the guest's lines on a fresh one
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null

# The cloud kernel builds no virtio driver in. The scene names the modules NN-name.ko so that the
# glob's order is the load order (each needs the ones before it).
for m in /lib/modules/*.ko; do
    insmod "$m" || echo "HG FAIL insmod $m"
done
# eth0 appears once virtio_net has probed the device: wait for it, at most 5 s.
n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do
    sleep 0.1
    n=$((n + 1))
done
ip link set lo up
ip addr add "$HG_IP" dev eth0 && ip link set eth0 up || echo "HG FAIL eth0 ip=$HG_IP"
guestd
echo "HG FAIL guestd exited $?"
poweroff -f
