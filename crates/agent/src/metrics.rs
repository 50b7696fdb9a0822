//! `/metrics` for Prometheus: the daemon fills `Metrics` each cycle; a scrape encodes it with
//! `prometheus-client` (OpenMetrics text), served by `tiny_http` on one background thread.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::act::kernel::ErrorCounts;
use crate::report::Cycle;
use crate::sense::select::PodRef;
use crate::sense::topology::Topology;

/// Pod/container pairs with a series of their own in `pod_moves_total`; moves of any further
/// pair count under pod="other" (a node runs at most 110 pods by default).
pub const POD_SERIES: usize = 128;

/// Upper bounds (seconds) of the cycle-duration histogram buckets.
const BUCKETS: [f64; 8] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1.0];

#[derive(Debug)]
pub struct Metrics {
    pub sensor: String,
    /// Per node of the last cycle: (node id, load, steal ticks).
    pub nodes: Vec<(usize, f64, f64)>,
    /// Busy sensor, per node of the last cycle: (node id, LC usage, LC run-queue wait).
    pub lc: Vec<(usize, Option<f64>, Option<f64>)>,
    pub be_tasks: usize,
    /// BE processes whose last move did not take (`decide::backoff`).
    pub backoff_tasks: usize,
    pub cycles: u64,
    pub moves: BTreeMap<String, u64>,
    /// Moves of processes in Kubernetes pods, by (pod uid, container id).
    pub pod_moves: BTreeMap<(String, String), u64>,
    pub errors: BTreeMap<String, u64>,
    cycle_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            sensor: String::new(),
            nodes: Vec::new(),
            lc: Vec::new(),
            be_tasks: 0,
            backoff_tasks: 0,
            cycles: 0,
            moves: BTreeMap::new(),
            pod_moves: BTreeMap::new(),
            errors: BTreeMap::new(),
            cycle_duration: Histogram::new(BUCKETS),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeSensor {
    node: u64,
    sensor: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabel {
    node: u64,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PodLabels {
    pod: String,
    container: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

impl Metrics {
    pub fn observe_cycle(&mut self, seconds: f64) {
        self.cycle_duration.observe(seconds);
    }

    /// Takes in one cycle: its readings by node id, its duration, its moves (none count in a
    /// dry run; `pods`: the pod and container of the processes in pods), and the error counts
    /// so far.
    pub fn observe(
        &mut self,
        topo: &Topology,
        c: &Cycle,
        dry_run: bool,
        errors: &ErrorCounts,
        pods: &HashMap<i32, PodRef>,
    ) {
        self.cycles += 1;
        let nodes = || topo.nodes.iter().zip(&c.readings);
        self.nodes = nodes().map(|(n, r)| (n.id, r.load, r.steal)).collect();
        self.lc = nodes().map(|(n, r)| (n.id, r.usage, r.wait)).collect();
        self.be_tasks = c.tasks;
        self.observe_cycle(c.wall_ms / 1e3);
        if !dry_run {
            for mv in &c.decision.moves {
                *self.moves.entry(mv.reason.clone()).or_default() += 1;
                if let Some(p) = pods.get(&mv.pid) {
                    let mut key = (p.uid.clone(), p.container.clone().unwrap_or_default());
                    if self.pod_moves.len() >= POD_SERIES && !self.pod_moves.contains_key(&key) {
                        key = ("other".into(), "other".into());
                    }
                    *self.pod_moves.entry(key).or_default() += 1;
                }
            }
        }
        for (k, v) in &errors.by_kind {
            self.errors.insert(k.to_string(), *v);
        }
    }

    /// The OpenMetrics text of the last cycle's values.
    pub fn render(&self) -> String {
        let mut r = Registry::with_prefix("colosched_agent");
        let node_load = Family::<NodeSensor, FloatGauge>::default();
        let steal = Family::<NodeLabel, FloatGauge>::default();
        for &(n, load, st) in &self.nodes {
            let sensor = self.sensor.clone();
            node_load
                .get_or_create(&NodeSensor {
                    node: n as u64,
                    sensor,
                })
                .set(load);
            steal.get_or_create(&NodeLabel { node: n as u64 }).set(st);
        }
        let (usage, wait) = (
            Family::<NodeLabel, FloatGauge>::default(),
            Family::<NodeLabel, FloatGauge>::default(),
        );
        for &(n, u, w) in &self.lc {
            let node = NodeLabel { node: n as u64 };
            // A value not measured is absent, not 0.
            if let Some(u) = u {
                usage.get_or_create(&node).set(u);
            }
            if let Some(w) = w {
                wait.get_or_create(&node).set(w);
            }
        }
        r.register(
            "node_load",
            "LC pressure per node, as a fraction of its CPUs",
            node_load,
        );
        r.register(
            "node_lc_usage",
            "Busy sensor: CPU time LC ran on the node over the last interval, as a fraction of its CPUs",
            usage,
        );
        r.register(
            "node_lc_wait",
            "Busy sensor: time LC threads waited on the node's run queues over the last interval, as a fraction of its CPUs (absent while not measured: no BE task ran)",
            wait,
        );
        r.register(
            "node_steal_ticks",
            "Steal ticks per node over the last interval",
            steal,
        );
        let be = Gauge::<i64>::default();
        be.set(self.be_tasks as i64);
        r.register(
            "be_tasks",
            "Best-effort processes selected in the last cycle",
            be,
        );
        let backoff = Gauge::<i64>::default();
        backoff.set(self.backoff_tasks as i64);
        r.register(
            "backoff_tasks",
            "Best-effort processes whose last move did not take, each held back (doubling, at most 32 intervals) until its next try",
            backoff,
        );
        let cycles = Counter::<u64>::default();
        cycles.inc_by(self.cycles);
        r.register("cycles", "Cycles run", cycles);
        let moves = Family::<Reason, Counter>::default();
        for (reason, &v) in &self.moves {
            moves
                .get_or_create(&Reason {
                    reason: reason.clone(),
                })
                .inc_by(v);
        }
        r.register("moves", "Tasks moved, by reason", moves);
        let pod_moves = Family::<PodLabels, Counter>::default();
        for ((pod, container), &v) in &self.pod_moves {
            let (pod, container) = (pod.clone(), container.clone());
            pod_moves
                .get_or_create(&PodLabels { pod, container })
                .inc_by(v);
        }
        r.register(
            "pod_moves",
            "Tasks of Kubernetes pods moved, by pod uid and container id (container \"\": the pod's own cgroup; at most 128 pairs, then pod=\"other\")",
            pod_moves,
        );
        let errors = Family::<Kind, Counter>::default();
        for (kind, &v) in &self.errors {
            errors.get_or_create(&Kind { kind: kind.clone() }).inc_by(v);
        }
        r.register(
            "errors",
            "Errors by kind (esrch, einval, eperm, eio, selector, other)",
            errors,
        );
        r.register(
            "cycle_duration_seconds",
            "Wall time of one cycle",
            self.cycle_duration.clone(),
        );
        let mut out = String::new();
        encode(&mut out, &r).expect("encoding into a String cannot fail");
        out
    }
}

pub use colosched_sys::metrics::{serve, Render};

impl Render for Metrics {
    fn render(&self) -> String {
        Metrics::render(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};

    #[test]
    fn pod_labels_are_bounded() {
        use crate::decide::plan::{Decision, Planned};
        let topo = Topology {
            nodes: Vec::new(),
            all_cpus: Default::default(),
            source: "pseudo",
        };
        let mut m = Metrics::default();
        let mut pods = HashMap::new();
        let mut moves = Vec::new();
        for pid in 1..=200 {
            let container = (pid % 2 == 0).then(|| format!("c{pid}"));
            pods.insert(
                pid,
                PodRef {
                    uid: format!("uid-{pid}"),
                    container,
                },
            );
            moves.push(Planned {
                pid,
                comm: "x".into(),
                from: 0,
                to: 1,
                reason: "coarse".into(),
            });
        }
        moves.push(Planned {
            pid: 999,
            comm: "not-in-a-pod".into(),
            from: 0,
            to: 1,
            reason: "coarse".into(),
        });
        let c = Cycle {
            decision: Decision {
                moves,
                ..Default::default()
            },
            ..Default::default()
        };
        m.observe(&topo, &c, false, &ErrorCounts::default(), &pods);
        m.observe(&topo, &c, true, &ErrorCounts::default(), &pods); // a dry run counts nothing
        let out = m.render();
        let series = out
            .lines()
            .filter(|l| l.starts_with("colosched_agent_pod_moves_total{"))
            .count();
        assert_eq!(series, POD_SERIES + 1, "{out}");
        assert!(
            out.contains("colosched_agent_pod_moves_total{pod=\"uid-1\",container=\"\"} 1"),
            "{out}"
        );
        assert!(
            out.contains("colosched_agent_pod_moves_total{pod=\"uid-2\",container=\"c2\"} 1"),
            "{out}"
        );
        let other = 200 - POD_SERIES;
        assert!(
            out.contains(&format!(
                "colosched_agent_pod_moves_total{{pod=\"other\",container=\"other\"}} {other}"
            )),
            "{out}"
        );
        assert!(
            out.contains("colosched_agent_moves_total{reason=\"coarse\"} 201"),
            "{out}"
        );
    }

    #[test]
    fn serves_prometheus_text_on_loopback() {
        let mut metrics = Metrics::default();
        (metrics.sensor, metrics.nodes) = ("busy".into(), vec![(0, 0.5, 0.0), (1, 0.1, 3.0)]);
        metrics.lc = vec![(0, Some(0.2), Some(0.3)), (1, Some(0.1), None)];
        let m = Arc::new(Mutex::new(metrics));
        m.lock().unwrap().observe_cycle(0.0007);
        m.lock().unwrap().moves.insert("coarse".into(), 4);
        m.lock().unwrap().backoff_tasks = 2;
        let addr = serve("127.0.0.1:0".parse().unwrap(), m).unwrap();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 200 OK"), "{out}");
        assert!(out.contains("application/openmetrics-text"), "{out}");
        assert!(out.trim_end().ends_with("# EOF"), "{out}");
        assert!(out.contains("colosched_agent_node_load{node=\"0\",sensor=\"busy\"} 0.5"));
        assert!(out.contains("colosched_agent_moves_total{reason=\"coarse\"} 4"));
        assert!(out.contains("colosched_agent_backoff_tasks 2"), "{out}");
        assert!(out.contains("colosched_agent_node_lc_usage{node=\"0\"} 0.2"));
        assert!(out.contains("colosched_agent_node_lc_wait{node=\"0\"} 0.3"));
        assert!(out.contains("colosched_agent_node_lc_usage{node=\"1\"} 0.1"));
        assert!(
            !out.contains("colosched_agent_node_lc_wait{node=\"1\"}"),
            "a wait not measured is absent, not 0"
        );
        assert!(out.contains("colosched_agent_cycle_duration_seconds_bucket{le=\"0.0005\"} 0"));
        assert!(out.contains("colosched_agent_cycle_duration_seconds_bucket{le=\"0.001\"} 1"));
        assert!(out.contains("colosched_agent_cycle_duration_seconds_count 1"));
    }
}
