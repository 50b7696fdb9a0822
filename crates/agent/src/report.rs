//! What the agent reports: one cycle as the decision log's JSON line and `plan --json` show it
//! (nodes by their sysfs ids, not their indices).

use std::collections::HashMap;

use serde::Serialize;

use crate::decide::plan::Decision;
use crate::now_unix;
use crate::sense::select::PodRef;
use crate::sense::sensor::NodeReading;
use crate::sense::topology::Topology;

/// What one cycle saw and did.
#[derive(Debug, Default)]
pub struct Cycle {
    pub readings: Vec<NodeReading>,
    pub decision: Decision,
    pub tasks: usize,
    /// Threads whose affinity was set (or cpusets/files written).
    pub changed: usize,
    pub cpu_ms: f64,
    pub wall_ms: f64,
}

/// A move as the decision log and `plan --json` show it: nodes by their ids.
#[derive(Serialize)]
pub struct Move<'a> {
    pid: i32,
    comm: &'a str,
    from_node: usize,
    to_node: usize,
    reason: &'a str,
    /// The Kubernetes pod's uid and the container's id, for a process in a pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pod: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
}

/// One line of the decision log (docs/agent.md lists the fields).
#[derive(Serialize)]
pub struct LogLine<'a> {
    time: f64,
    cycle: u64,
    loads: Vec<f64>,
    raw: Vec<f64>,
    /// Busy sensor: LC usage and LC run-queue wait per node (their sum is the load).
    usage: Vec<Option<f64>>,
    wait: Vec<Option<f64>>,
    triggered: bool,
    targets: Vec<usize>,
    moved: Vec<Move<'a>>,
    reason: String,
    dry_run: bool,
    be_tasks: usize,
    threads_changed: usize,
    cycle_cpu_ms: f64,
    cycle_wall_ms: f64,
    errors: u64,
}

/// The ids of nodes given by index (they differ where node ids have gaps).
pub fn node_ids(topo: &Topology, nodes: &[usize]) -> Vec<usize> {
    nodes.iter().map(|&n| topo.nodes[n].id).collect()
}

/// The decision's moves; `pods`: the pod and container of the processes in pods.
pub fn moves<'a>(
    topo: &Topology,
    d: &'a Decision,
    pods: &'a HashMap<i32, PodRef>,
) -> Vec<Move<'a>> {
    d.moves
        .iter()
        .map(|m| {
            let pod = pods.get(&m.pid);
            Move {
                pid: m.pid,
                comm: &m.comm,
                from_node: topo.nodes[m.from].id,
                to_node: topo.nodes[m.to].id,
                reason: &m.reason,
                pod: pod.map(|p| p.uid.as_str()),
                container: pod.and_then(|p| p.container.as_deref()),
            }
        })
        .collect()
}

/// The decision-log line of cycle number `cycle`, newline included. Serialized straight from
/// the decision (building a JSON value first cost 3 ms for a move of 1,000 processes).
pub fn log_line(
    topo: &Topology,
    cycle: u64,
    c: &Cycle,
    errors: u64,
    dry_run: bool,
    policy: &str,
    pods: &HashMap<i32, PodRef>,
) -> Vec<u8> {
    let line = LogLine {
        time: now_unix(),
        cycle,
        loads: c.readings.iter().map(|r| r.load).collect(),
        raw: c.readings.iter().map(|r| r.raw).collect(),
        usage: c.readings.iter().map(|r| r.usage).collect(),
        wait: c.readings.iter().map(|r| r.wait).collect(),
        triggered: c.decision.triggered,
        targets: node_ids(topo, &c.decision.targets),
        moved: moves(topo, &c.decision, pods),
        reason: if c.decision.moves.is_empty() {
            c.decision.note.clone()
        } else {
            policy.to_string()
        },
        dry_run,
        be_tasks: c.tasks,
        threads_changed: c.changed,
        cycle_cpu_ms: c.cpu_ms,
        cycle_wall_ms: c.wall_ms,
        errors,
    };
    let mut text = serde_json::to_vec(&line).unwrap_or_default();
    text.push(b'\n');
    text
}
