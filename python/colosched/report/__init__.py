"""The HTML reports, one module per simulator, all built from one toolkit:

    toolkit   a figure drawn to PNG, the page around it, writing page and figures into place
    cluster   `sim cluster` and `sweep cluster`: the thesis's Figs. 5-4 .. 5-9 (write_report)
    host      `sim host` and `sweep host` (write_host_report, write_host_sweep_report)
    vms       `sim vms` and `sweep vms` (write_vms_report, write_vms_sweep_report)

Import the module you need (`from colosched.report.cluster import write_report`); this package
imports nothing itself, so naming it costs nothing.
"""
