//! The host agent's `/metrics` (served by `colosched_sys::metrics::serve`): each window's values, taken
//! from the window's decision-log object so the two never disagree.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VmLabel {
    vm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabel {
    pool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

/// One VM's values of the last window.
#[derive(Clone, Debug, Default, PartialEq)]
struct VmValues {
    nsvm: bool,
    load: f64,
    f_ro: f64,
    f_se: f64,
}

#[derive(Debug, Default)]
pub struct HostMetrics {
    windows: u64,
    vms: BTreeMap<String, VmValues>,
    /// Per VM since start: packets its taps dropped toward it, packets it sent.
    dropped: BTreeMap<String, u64>,
    sent: BTreeMap<String, u64>,
    pool_cpus: (u64, u64),
    placed: u64,
    changes: u64,
    errors: BTreeMap<String, u64>,
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(0.0)
}

impl HostMetrics {
    /// Takes in one window (its decision-log object) and the threads now in a pool.
    pub fn observe(&mut self, w: &Value, placed: usize) {
        self.windows += 1;
        self.vms.clear();
        for vm in w["vms"].as_array().into_iter().flatten() {
            let name = vm["name"].as_str().unwrap_or("?").to_string();
            *self.dropped.entry(name.clone()).or_default() += num(vm, "to_guest_dropped") as u64;
            *self.sent.entry(name.clone()).or_default() += num(vm, "from_guest") as u64;
            let values = VmValues {
                nsvm: vm["kind"] == "nsvm",
                load: num(vm, "load"),
                f_ro: num(vm, "f_ro"),
                f_se: num(vm, "f_se"),
            };
            self.vms.insert(name, values);
        }
        let cpus = |pool: &str| {
            w["pools"][pool]["cpus"]
                .as_str()
                .and_then(|c| c.parse::<colosched_core::cpuset::CpuSet>().ok())
                .map_or(0, |c| c.len() as u64)
        };
        self.pool_cpus = (cpus("nsvm"), cpus("nnvm"));
        self.placed = placed as u64;
        self.changes += num(w, "changes") as u64;
        for (k, v) in w["errors"].as_object().into_iter().flatten() {
            self.errors.insert(k.clone(), v.as_u64().unwrap_or(0));
        }
    }

    pub fn render(&self) -> String {
        let mut r = Registry::with_prefix("colosched_host");
        let per_vm = || Family::<VmLabel, FloatGauge>::default();
        let (nsvm, load, f_ro, f_se) = (per_vm(), per_vm(), per_vm(), per_vm());
        for (name, v) in &self.vms {
            let l = VmLabel { vm: name.clone() };
            nsvm.get_or_create(&l).set(v.nsvm as u8 as f64);
            load.get_or_create(&l).set(v.load);
            f_ro.get_or_create(&l).set(v.f_ro);
            f_se.get_or_create(&l).set(v.f_se);
        }
        r.register(
            "vm_nsvm",
            "1 when the VM is in the NSVM pool's class (network-queuing sensitive)",
            nsvm,
        );
        r.register(
            "vm_load_cpus",
            "CPU load of the VM's vCPU threads over the last window (run + wait, in CPUs)",
            load,
        );
        r.register("vm_rx_overflow_freq", "Fraction of the last window's samples in which the VM's tap dropped packets toward it (f_ro)", f_ro);
        r.register(
            "vm_tx_stall_freq",
            "Fraction of the last window's samples in which the VM sent nothing (f_se)",
            f_se,
        );
        let totals = |m: &BTreeMap<String, u64>| {
            let f = Family::<VmLabel, Counter>::default();
            for (name, &v) in m {
                f.get_or_create(&VmLabel { vm: name.clone() }).inc_by(v);
            }
            f
        };
        r.register(
            "vm_to_guest_dropped",
            "Packets the VM's taps dropped toward it (tx_dropped)",
            totals(&self.dropped),
        );
        r.register(
            "vm_from_guest_packets",
            "Packets the VM sent (its taps' rx_packets)",
            totals(&self.sent),
        );
        let pools = Family::<PoolLabel, Gauge>::default();
        for (pool, n) in [("nsvm", self.pool_cpus.0), ("nnvm", self.pool_cpus.1)] {
            pools
                .get_or_create(&PoolLabel { pool: pool.into() })
                .set(n as i64);
        }
        r.register(
            "pool_cpus",
            "CPUs of each pool (0: no pools, the host as it was)",
            pools,
        );
        let gauge = |v: u64| {
            let g = Gauge::<i64>::default();
            g.set(v as i64);
            g
        };
        r.register(
            "threads_placed",
            "vCPU threads now in a pool",
            gauge(self.placed),
        );
        let counter = |v: u64| {
            let c = Counter::<u64>::default();
            c.inc_by(v);
            c
        };
        r.register(
            "windows",
            "Identification windows run",
            counter(self.windows),
        );
        r.register(
            "thread_changes",
            "vCPU threads moved to a pool (with their slice)",
            counter(self.changes),
        );
        let errors = Family::<KindLabel, Counter>::default();
        for (kind, &v) in &self.errors {
            errors
                .get_or_create(&KindLabel { kind: kind.clone() })
                .inc_by(v);
        }
        r.register(
            "errors",
            "Errors by kind (gone, attach, slice, vm_gone, discovery, restore)",
            errors,
        );
        let mut out = String::new();
        encode(&mut out, &r).expect("encoding into a String cannot fail");
        out
    }
}

impl colosched_sys::metrics::Render for HostMetrics {
    fn render(&self) -> String {
        HostMetrics::render(self)
    }
}
