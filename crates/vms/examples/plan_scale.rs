//! How long one planning window takes on a large cluster (issue 16's target: 10,000 VMs on 500
//! hypervisors in ≤ 0.2 s). `cargo run --release -p colosched-vms --example plan_scale [VMS HOSTS]`
use std::time::Instant;

use colosched_core::Rng;
use colosched_vms::decide::model::{App, Cluster, Host, Preference, Vm};
use colosched_vms::decide::plan::{plan, PlanParams};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().expect("a number"));
    let (n, hosts) = (args.next().unwrap_or(10_000), args.next().unwrap_or(500));
    let mut rng = Rng::new(1);
    let apps: Vec<App> = (0..n / 20)
        .map(|i| App {
            id: format!("app{i}"),
            preference: if i % 3 == 0 {
                Preference::Spread
            } else {
                Preference::None
            },
        })
        .collect();
    let cluster = Cluster {
        hosts: (0..hosts)
            .map(|i| Host {
                id: format!("h{i}"),
                ssd_capacity_mb: 65_536.0,
                ssd_iops: 40_000.0,
                ssd_bw_mbps: 500.0,
                link_gbit: None,
            })
            .collect(),
        vms: (0..n)
            .map(|i| Vm {
                id: format!("vm{i}"),
                host: rng.below(hosts),
                app: Some(i / 20),
                cache_mb: 256.0,
                mem_mb: 2048.0,
                iops: rng.next_f64() * 4000.0,
                bw_mbps: rng.next_f64() * 60.0,
                ..Vm::default()
            })
            .collect(),
        apps,
        backend: None,
    };
    let mut best = f64::MAX;
    let mut moves = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let p = plan(&cluster, &PlanParams::default());
        best = best.min(t.elapsed().as_secs_f64());
        moves = p.moves();
    }
    println!("{n} VMs on {hosts} hosts: one plan in {best:.3} s (best of 5), {moves} moves");
}
