//! How the simulator's cost grows with the host: 8, 32 and 128 cores (a quarter at SF 1.8),
//! 4 vCPUs per core, half the VMs serial and half parallel, all restarted when they complete;
//! 5 simulated seconds per scheduler. Prints events and wall time per event.
//!
//! cargo run --release -p colosched-host --example scale_sketch

use colosched_host::sim::sched::{Credit, CreditParams, Eevdf, EevdfParams, Ia, IaSchedParams};
use colosched_host::sim::{simulate, Core, Host, RunConfig, Scheduler, Topology, Vm, Workload, MS};

fn main() {
    println!("cores vcpus scheduler   events   wall_s  ns/event");
    for cores in [8usize, 32, 128] {
        let mut host_cores = vec![
            Core {
                speed: 1.8,
                reserved: false
            };
            cores / 4
        ];
        host_cores.extend(vec![
            Core {
                speed: 1.0,
                reserved: false
            };
            cores - cores / 4
        ]);
        let host = Host {
            cores: host_cores,
            migration_warmup_ms: 0.5,
        };
        let vms: Vec<Vm> = (0..cores)
            .map(|i| {
                let workload = if i % 2 == 0 {
                    Workload::Serial {
                        work_ms: 300.0,
                        mem_intensity: 0.3,
                    }
                } else {
                    Workload::Parallel {
                        phases: 50,
                        phase_ms: 2.0,
                        spin_us: 50.0,
                    }
                };
                Vm {
                    repeat: true,
                    ..Vm::new(&format!("vm{i}"), 4, workload)
                }
            })
            .collect();
        let topo = Topology::new(&host, &vms);
        let schedulers: Vec<Box<dyn Scheduler>> = vec![
            Box::new(Credit::new(&topo, CreditParams::default())),
            Box::new(Ia::new(&topo, IaSchedParams::default()).expect("VMs fit")),
            Box::new(Eevdf::new(&topo, EevdfParams::linux(cores))),
        ];
        let cfg = RunConfig {
            horizon: 5_000 * MS,
            record_intervals: false,
        };
        for mut s in schedulers {
            let t = std::time::Instant::now();
            let r = simulate(&host, &vms, s.as_mut(), &cfg);
            let wall = t.elapsed().as_secs_f64();
            println!(
                "{cores:5} {:5} {:9} {:8} {wall:8.3} {:9.0}",
                cores * 4,
                r.scheduler,
                r.events,
                wall * 1e9 / r.events as f64
            );
        }
    }
}
