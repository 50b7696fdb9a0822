"""`colosched agent|host|memwatch|migrate`: commands whose parser and signal handling are Rust's.
`main` hands their whole command line to the engine; the parser lists them for --help only."""

from __future__ import annotations

HELP = {
    "agent": "node agent: move best-effort tasks between NUMA nodes (docs/agent.md)",
    "host": "host agent: vCPU pools and slices for QEMU/KVM VMs (docs/host-agent.md)",
    "memwatch": "memory-threshold notification for a cgroup (docs/memwatch.md)",
    "migrate": "live-migrate the VMs of a plan over QMP or through libvirt (docs/vm-placement.md)",
}


def add_parsers(sub) -> None:
    for name, help_text in HELP.items():
        sub.add_parser(name, help=help_text)


def run(argv: list[str]) -> int:
    """Runs `argv` (its first word one of HELP's) in the engine."""
    from colosched import _native

    command, rest = argv[0], argv[1:]
    if command == "agent":
        # The agent parses its own flags and waits for SIGTERM/SIGINT itself, so it can restore
        # what it changed before exiting; same command line as the static binary.
        return _native.agent_main(rest)
    if command == "host":
        # `colosched-agent host …`: the host agent lives in the agent's binary and parser.
        return _native.agent_main(argv)
    if command == "memwatch":
        # Same command line as `colosched-agent memwatch`; it unregisters on SIGTERM/SIGINT itself.
        return _native.memwatch_main(rest)
    # migrate: the executor parses its own flags and cancels running migrations on SIGTERM/SIGINT.
    return _native.migrate_main(rest)
