"""A throw-away Linux guest with 4 real NUMA nodes, booted under qemu, for the agent's end-to-end test.

`guest.py` fetches a Debian cloud kernel (cached), packs busybox-static, the static agent binary,
`agent.toml` and an init script into a gzip'd newc initramfs, and boots it under qemu TCG.
`init.sh` runs the agent scenarios; `smoke_init.sh` only checks the guest itself (4 nodes, taskset).
Run by hand: `.venv/bin/python tests/numa_guest/guest.py [--smoke]`; it prints the serial console.
"""
