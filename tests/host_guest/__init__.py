"""QEMU TCG guests with virtio-net on taps inside a private network namespace, with real traffic:
the test bed of the host agent (issue 15). Run by hand: `python tests/host_guest/scene.py --smoke`.

`scene.py` builds it. `HostScene([Guest(vcpus=2), Guest(), Guest()], tmp=dir)` is a context manager:
it creates a network namespace `hg-<pid>-<n>`, a tap `hgtapI` (10.77.I.1/24) in it per guest, and boots
each guest (qemu TCG, `-smp N`, 160 MiB, virtio-net-pci on the tap, QMP on a unix socket) inside it with
`ip netns exec`; the guest's eth0 is 10.77.I.2. On exit, whatever happened (exception, Ctrl-C,
SIGTERM in the script), it kills qemu, deletes the taps and the namespace and removes its directory;
`leftovers()` says what of it still exists (nothing, after exit). qemu has PR_SET_PDEATHSIG, so a
SIGKILLed test run leaves no guest running, and the next scene deletes such a run's namespace and
directory (`sweep_stale`). What it offers, guest i being `s.guests[i]`:
    s.netns, s.netns_inode, s.boot_seconds
    s.guests[i].pid, .vcpu_tids(), .tap, .host_ip, .ip, .qmp, .qmp_command("query-cpus-fast"), .console
    s.tap_counters(i)           /sys/class/net/<tap>/statistics, read inside the namespace
    s.hog(i, on)                a busy loop on every vCPU of guest i (started or stopped)
    s.stream(i, "tcp"|"udp", seconds, mbit=None, size=1400) -> sent, received, mbit, seconds, ...
    s.ping(i, count, interval)  -> round-trip times in ms (a lost ping is missing)
    s.stats(i), s.control(i, cmd), s.netns_socket()  guestd's counters (hog_work: the hogs' loop
                                iterations, the work they did); a socket in the namespace

The guest (`init.sh`, busybox-static) loads the cloud kernel's virtio modules (fetched once from the
kernel's own package by `numa_guest.guest.net_kernel()` and cached beside the kernel), configures eth0
from `HG_IP` on the kernel command line and runs `guestd.c` (static): a TCP sink that tells how many
bytes it read, a UDP sink with a counter, and a control port for the hogs. Every socket the host side
uses is made inside the namespace (a thread setns()es, makes the socket, ends), so traffic never leaves it.

Choices that matter to whoever builds on this:
- vCPU threads are named `CPU n/TCG` only because qemu runs with `-name ...,debug-threads=on`; without
  it every thread is called `qemu-system-x86`. QMP `query-cpus-fast` gives the same thread ids.
- The hogs run SCHED_IDLE inside the guest: a guest's own network work always beats its hogs, so a
  guest loses packets only when its vCPU thread waits for a host CPU, which is what spec 002 is about
  (with hogs of equal priority the losses moved into the guest's socket instead, unseen by the host).
- guestd's UDP socket has an 8 MiB buffer for the same reason: a burst the vCPU delivers at once after
  waiting on the host is kept. Measured: every datagram a flood lost was counted by the tap's
  tx_dropped (sent = received + tx_dropped exactly); guest_dropped (RcvbufErrors) stayed 0.

Measured on this 2-core machine (kernel 6.18, guest 6.1 cloud kernel, guests 2/1/1 vCPUs), quiet host:
- boot until every guestd answers: 1 guest 2.6 s; 3 guests 4.1-4.9 s (8.6 s beside a Rust build).
- TCP into guest 1, unpaced, 3 s: 3.7-4.0 Gbit/s idle (vnet_hdr offloads: the tap carries segments
  of ~60 KB on average, so tx_packets counts ~1/40 of the MTU-sized frames; DESIGN.md's ~290 Mbit/s
  was measured some other way); 1.5 Gbit/s with guests 0 and 2 hogging; 0.9 Gbit/s with all hogging.
- UDP into guest 1 (1400-byte datagrams, 2 s): 300 Mbit/s arrives whole, hogs or not (quiet host).
  An unpaced flood (the Python sender offers 1.7-4.6 Gbit/s) is drained at ~1.0 Gbit/s alone, ~0.47
  with guests 0 and 2 hogging, ~0.42 with all three hogging; the rest shows as tap1 tx_dropped, and
  the other taps' tx_dropped stay 0. With a Rust build running beside it the ratio crowded/alone
  ranged 0.43-0.86, too noisy for a test to assert, so the tests assert only what holds every time.
- ping to guest 1 (50 at 20 ms): median 0.62-0.66 ms, max 2.2 ms idle; all guests hogging: median
  2.5 ms, p90 4.0 ms, max 4.8 ms (medians of 0.4-5.4 ms over other runs, all replies back).
- tests/test_host_guests.py: 11 tests in 25-28 s; 44 s (and passing) beside two busy loops on the
  host's two CPUs, where 3 guests booted in 16 s, TCP reached 0.6 Gbit/s, a hogged vCPU thread got
  0.2 CPU-s per second and ping to guest 1 with all guests hogging had a median of 20 ms.
"""
