//! A first look at the spec 001 setting (not yet the paper's experiment): 2 fast cores (SF 1.8)
//! and 6 slow ones; VMs of 2, 2 and 6 vCPUs running serial programs and one of 8 vCPUs running a
//! parallel one, all restarted when they complete; 20 simulated seconds per scheduler.
//! The program parameters are this example's own, not the paper's (its Table 4 is lost).
//!
//! cargo run --release -p colosched-host --example spec001_sketch

use colosched_host::sim::sched::{Credit, CreditParams, Eevdf, EevdfParams, Ia, IaSchedParams};
use colosched_host::sim::{
    simulate, Core, Host, RunConfig, Scheduler, SimResult, Topology, Vm, Workload, MS,
};

fn mean_completion_ms(r: &SimResult, vm: usize) -> (f64, usize) {
    let times: Vec<f64> = r
        .completions
        .iter()
        .filter(|c| c.vm == vm)
        .map(|c| (c.finished - c.started) as f64 / 1e6)
        .collect();
    (
        times.iter().sum::<f64>() / times.len().max(1) as f64,
        times.len(),
    )
}

fn main() {
    let mut cores = vec![
        Core {
            speed: 1.8,
            reserved: false
        };
        2
    ];
    cores.extend(vec![
        Core {
            speed: 1.0,
            reserved: false
        };
        6
    ]);
    let host = Host {
        cores,
        migration_warmup_ms: 0.5,
    };
    let serial = Workload::Serial {
        work_ms: 500.0,
        mem_intensity: 0.3,
    };
    let cfg = RunConfig {
        horizon: 20_000 * MS,
        record_intervals: false,
    };
    println!("spin_us scheduler  mean completion ms (runs): vm0 s2 | vm1 s2 | vm2 s6 | vm3 p8   events  wall");
    for spin_us in [20.0, 200.0] {
        let parallel = Workload::Parallel {
            phases: 100,
            phase_ms: 2.0,
            spin_us,
        };
        let vms = [
            Vm {
                repeat: true,
                ..Vm::new("s2a", 2, serial.clone())
            },
            Vm {
                repeat: true,
                ..Vm::new("s2b", 2, serial.clone())
            },
            Vm {
                repeat: true,
                ..Vm::new("s6", 6, serial.clone())
            },
            Vm {
                repeat: true,
                ..Vm::new("p8", 8, parallel)
            },
        ];
        let topo = Topology::new(&host, &vms);
        let schedulers: Vec<Box<dyn Scheduler>> = vec![
            Box::new(Credit::new(&topo, CreditParams::default())),
            Box::new(Ia::new(&topo, IaSchedParams::default()).expect("VMs fit")),
            Box::new(Eevdf::new(&topo, EevdfParams::linux(host.cores.len()))),
        ];
        for mut s in schedulers {
            let t = std::time::Instant::now();
            let r = simulate(&host, &vms, s.as_mut(), &cfg);
            let wall = t.elapsed();
            let cells: Vec<String> = (0..4)
                .map(|vm| {
                    let (mean, n) = mean_completion_ms(&r, vm);
                    format!("{mean:6.0} ({n:3})")
                })
                .collect();
            println!(
                "{spin_us:7} {:9} {}  {:7} {:?}",
                r.scheduler,
                cells.join(" | "),
                r.events,
                wall
            );
        }
    }
}
