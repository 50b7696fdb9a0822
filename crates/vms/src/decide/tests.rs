use super::model::{logical_distance, App, Cluster, Host, Preference, Vm};
use super::plan::{
    best_distance, order_moves, place, plan, random_move, relabel, violations, PlanParams,
    Violation,
};
use colosched_core::Rng;
use proptest::prelude::*;

/// The paper's hypervisor (Intel SSD 535 240 GB): 8 GB of it as cache, 40 k IOPS, 500 MB/s.
fn host(id: usize) -> Host {
    Host {
        id: format!("h{id}"),
        ssd_capacity_mb: 8192.0,
        ssd_iops: 40_000.0,
        ssd_bw_mbps: 500.0,
    }
}

fn vm(id: usize, host: usize, app: Option<usize>, iops: f64) -> Vm {
    Vm {
        id: format!("vm{id}"),
        host,
        app,
        cache_mb: 256.0,
        mem_mb: 1024.0,
        iops,
        bw_mbps: iops * 32.0 / 1024.0, // 32 KB blocks, as the paper's fio runs
    }
}

fn cluster(hosts: usize, vms: Vec<Vm>, apps: Vec<App>) -> Cluster {
    Cluster {
        hosts: (0..hosts).map(host).collect(),
        vms,
        apps,
    }
}

fn zookeeper(on: &[usize]) -> Cluster {
    let vms = on
        .iter()
        .enumerate()
        .map(|(i, &h)| vm(i, h, Some(0), 500.0))
        .collect();
    let app = App {
        id: "zk".into(),
        preference: Preference::Spread,
    };
    cluster(2, vms, vec![app])
}

#[test]
fn logical_distance_is_the_pairs_on_different_hosts() {
    let c = zookeeper(&[0, 0, 0, 1, 1, 1]);
    assert_eq!(
        logical_distance(&c, &c.placement(), 0),
        9,
        "3 × 3, the paper's ours"
    );
    assert_eq!(logical_distance(&c, &[0, 0, 0, 0, 1, 1], 0), 8);
    assert_eq!(logical_distance(&c, &[0; 6], 0), 0);
    assert_eq!(best_distance(6, 2), 9);
    assert_eq!(best_distance(6, 3), 12);
    assert_eq!(best_distance(2, 5), 1);
    assert_eq!(best_distance(0, 2), 0);
}

#[test]
fn zookeeper_all_on_one_host_is_spread_three_and_three_one_at_a_time() {
    let c = zookeeper(&[0; 6]);
    assert!(matches!(
        violations(&c, &c.placement())[..],
        [Violation::Spread {
            distance: 0,
            best: 9,
            ..
        }]
    ));
    let p = plan(&c, &PlanParams::default());
    assert_eq!(logical_distance(&c, &p.target, 0), 9);
    assert!(p.violations.is_empty(), "{:?}", p.violations);
    assert_eq!(p.moves(), 3, "three stay, three go");
    assert!(
        p.waves.iter().all(|w| w.len() == 1),
        "one migration per host at a time"
    );
}

#[test]
fn heavy_vms_are_dealt_over_the_ssds() {
    // Four heavy fio VMs (5 k IOPS of 32 KB each: 0.31 of an SSD's bandwidth) on h0 with two
    // light ones; h1 holds two light ones.
    let mut vms: Vec<Vm> = (0..4).map(|i| vm(i, 0, None, 5000.0)).collect();
    vms.extend((4..8).map(|i| vm(i, usize::from(i >= 6), None, 500.0)));
    let c = cluster(2, vms, Vec::new());
    assert!(c.utilisation(&c.placement())[0] > 1.0, "h0 is saturated");
    let p = plan(&c, &PlanParams::default());
    let heavy_on = |h| (0..4).filter(|&v| p.target[v] == h).count();
    assert_eq!((heavy_on(0), heavy_on(1)), (2, 2));
    assert!(p.violations.is_empty(), "{:?}", p.violations);
    assert!(c.utilisation(&p.target).iter().all(|&u| u < 0.85));
    // Off the saturated SSD first, and two heavy VMs must leave h0.
    assert_eq!(p.waves[0][0].from, 0);
    assert_eq!(p.moves(), 2, "{:?}", p.waves);
}

#[test]
fn a_relabelling_of_the_planners_own_placement_needs_no_move() {
    let mut vms: Vec<Vm> = (0..9)
        .map(|i| vm(i, 0, None, 1000.0 * (i + 1) as f64))
        .collect();
    let c0 = cluster(3, vms.clone(), Vec::new());
    let own = place(&c0, &PlanParams::default());
    for (v, &h) in vms.iter_mut().zip(&own) {
        v.host = (h + 1) % 3; // the same groups, other names
    }
    let c = cluster(3, vms, Vec::new());
    let p = plan(&c, &PlanParams::default());
    assert_eq!(p.moves(), 0, "{:?}", p.waves);
    assert_eq!(
        p.reason.as_deref(),
        Some("the placement is already the planner's")
    );
}

#[test]
fn a_small_gain_is_not_worth_the_moves() {
    // h0 carries 0.81 of its SSD, h1 0.63; evened out, the busiest would carry 0.75: a gain of
    // 0.06, below a min_gain of 0.1.
    let vms = vec![
        vm(0, 0, None, 6000.0),
        vm(1, 0, None, 6000.0),
        vm(2, 0, None, 1000.0),
        vm(3, 1, None, 10_000.0),
    ];
    let c = cluster(2, vms, Vec::new());
    let lazy = PlanParams {
        min_gain: 0.1,
        ..PlanParams::default()
    };
    let p = plan(&c, &lazy);
    assert_eq!(p.moves(), 0);
    assert!(
        p.reason
            .as_deref()
            .unwrap_or("")
            .starts_with("not worth moving"),
        "{p:?}"
    );
    let eager = PlanParams {
        min_gain: 0.0,
        ..PlanParams::default()
    };
    assert!(plan(&c, &eager).moves() > 0);
}

#[test]
fn a_vm_larger_than_every_ssd_is_said_not_hidden() {
    let mut big = vm(0, 0, None, 100.0);
    big.cache_mb = 10_000.0;
    let c = cluster(2, vec![big, vm(1, 1, None, 100.0)], Vec::new());
    let p = plan(&c, &PlanParams::default());
    assert!(
        p.violations
            .iter()
            .any(|v| matches!(v, Violation::Capacity { mb, .. } if *mb >= 10_000.0)),
        "{:?}",
        p.violations
    );
}

#[test]
fn waves_keep_to_the_limits_per_host_and_cluster() {
    let vms = (0..12).map(|i| vm(i, 0, None, 2000.0)).collect();
    let c = cluster(4, vms, Vec::new());
    let params = PlanParams {
        per_host: 2,
        per_cluster: 3,
        ..PlanParams::default()
    };
    let p = plan(&c, &params);
    assert_eq!(p.moves(), 9, "three stay on h0");
    for w in &p.waves {
        assert!(w.len() <= 3);
        assert!(w.iter().filter(|m| m.from == 0).count() <= 2, "{w:?}");
    }
    assert_eq!(p.waves.len(), 5, "h0 sends two at a time: ⌈9 / 2⌉");
}

#[test]
fn the_random_baseline_moves_one_vm_to_another_host() {
    let c = zookeeper(&[0, 0, 0, 1, 1, 1]);
    let mut rng = Rng::new(7);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let m = random_move(&c, &mut rng).unwrap();
        assert_eq!(m.from, c.vms[m.vm].host);
        assert_ne!(m.to, m.from);
        seen.insert(m.vm);
    }
    assert_eq!(seen.len(), 6, "every VM can be drawn");
    assert!(random_move(&cluster(1, vec![vm(0, 0, None, 1.0)], vec![]), &mut rng).is_none());
}

fn arb_cluster() -> impl Strategy<Value = Cluster> {
    (1usize..6, 0usize..30, 0usize..3).prop_flat_map(|(hosts, n, apps)| {
        let vms = prop::collection::vec(
            (
                0..hosts,
                prop::option::of(0..apps.max(1)),
                0.0f64..20_000.0,
                64.0f64..4096.0,
            ),
            n,
        );
        (Just(hosts), vms, prop::collection::vec(any::<bool>(), apps)).prop_map(
            |(hosts, vms, spread)| {
                let apps: Vec<App> = spread
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| App {
                        id: format!("a{i}"),
                        preference: if s {
                            Preference::Spread
                        } else {
                            Preference::None
                        },
                    })
                    .collect();
                let vms = vms
                    .into_iter()
                    .enumerate()
                    .map(|(i, (h, a, iops, cache))| Vm {
                        cache_mb: cache,
                        app: a.filter(|&a| a < apps.len()),
                        ..vm(i, h, None, iops)
                    })
                    .collect();
                cluster(hosts, vms, apps)
            },
        )
    })
}

proptest! {
    /// Plans never lose or duplicate a VM, move each at most once, keep to the wave limits,
    /// and report every limit the target breaks.
    #[test]
    fn plans_are_whole_and_honest(c in arb_cluster(), per_host in 1usize..3, per_cluster in 1usize..5) {
        let params = PlanParams { per_host, per_cluster, min_gain: 0.0, ..PlanParams::default() };
        let p = plan(&c, &params);
        prop_assert_eq!(p.target.len(), c.vms.len());
        prop_assert!(p.target.iter().all(|&h| h < c.hosts.len()));
        let current = c.placement();
        let mut moved = vec![false; c.vms.len()];
        for w in &p.waves {
            prop_assert!(w.len() <= per_cluster);
            for h in 0..c.hosts.len() {
                prop_assert!(w.iter().filter(|m| m.from == h || m.to == h).count() <= per_host);
            }
            for m in w {
                prop_assert!(!moved[m.vm], "VM {} moves twice", m.vm);
                moved[m.vm] = true;
                prop_assert_eq!((m.from, m.to), (current[m.vm], p.target[m.vm]));
            }
        }
        for v in 0..c.vms.len() {
            prop_assert_eq!(moved[v], current[v] != p.target[v]);
        }
        let (demand, util) = (c.demand(&p.target), c.utilisation(&p.target));
        for h in 0..c.hosts.len() {
            if demand[h].0 > c.hosts[h].ssd_capacity_mb {
                let said = p.violations.iter().any(|v| matches!(v, Violation::Capacity { host, .. } if *host == h));
                prop_assert!(said, "capacity of host {} broken, not said", h);
            }
            if util[h] > 1.0 {
                let said = p.violations.iter().any(|v| matches!(v, Violation::Throughput { host, .. } if *host == h));
                prop_assert!(said, "throughput of host {} broken, not said", h);
            }
        }
    }

    /// Renaming hosts changes nothing the planner decides: a cluster whose VMs already sit as
    /// the planner would put them, under other host names, needs no move.
    #[test]
    fn a_relabelling_needs_zero_moves(c in arb_cluster(), shift in 0usize..5) {
        let n = c.hosts.len();
        let mut c2 = c.clone();
        let params = PlanParams::default();
        for (v, &h) in c2.vms.iter_mut().zip(&place(&c, &params)) {
            v.host = (h + shift) % n;
        }
        let target = relabel(&c2, &c2.placement(), &place(&c2, &params));
        prop_assert_eq!(target, c2.placement());
        prop_assert!(order_moves(&c2, &c2.placement(), &c2.placement(), &PlanParams::default()).is_empty());
    }
}
