//! The decision's view of each BE process: its node, where its mask lets it run, its CPU use
//! since the last look, and whether it may move (cool-down, minimum age). Pure: the caller
//! passes the clock readings.

use std::collections::HashMap;

use colosched_core::Cooldown;

use crate::cpuset::CpuSet;
use crate::decide::backoff::Backoff;
use crate::decide::plan::TaskView;
use crate::sense::select::BeTask;
use crate::sense::topology::Topology;

/// A process across cycles: pid and start time (a pid given to another process is another key).
pub type Key = (i32, u64);

pub fn key(t: &BeTask) -> Key {
    (t.pid, t.starttime)
}

/// What the views remember between looks.
#[derive(Debug)]
pub struct Views {
    /// USER_HZ: the unit of the tasks' CPU ticks and start times.
    pub hz: f64,
    pub min_task_age_s: f64,
    /// Processes moved recently, in milliseconds since the agent started (the core's cool-down,
    /// which the simulator counts in cycles).
    pub cooldown: Cooldown<Key>,
    /// Processes whose last move did not take, held back for a while (in cycles).
    pub backoff: Backoff<Key>,
    /// CPU ticks and faults of each BE process at the previous look, and when that was (s).
    prev: HashMap<Key, (u64, u64)>,
    prev_s: Option<f64>,
}

impl Views {
    /// `backoff_cycles`: how long a first failed move holds a process back, in cycles.
    pub fn new(hz: f64, cooldown_s: f64, min_task_age_s: f64, backoff_cycles: u64) -> Views {
        Views {
            hz,
            min_task_age_s,
            cooldown: Cooldown::new((cooldown_s * 1e3).ceil() as u64),
            backoff: Backoff::new(backoff_cycles),
            prev: HashMap::new(),
            prev_s: None,
        }
    }

    /// The views of the tasks whose mask is known. CPU use is measured since the previous look
    /// at a task, or over its lifetime if there was none (so the first decision is informed).
    /// `uptime_s`: seconds since boot (the clock of start times); `now_s`: since the agent began;
    /// `cycle`: the agent's cycle number (the clock of the back-off).
    pub fn of<'a>(
        &self,
        tasks: &'a [BeTask],
        masks: &HashMap<i32, CpuSet>,
        topo: &Topology,
        (uptime_s, now_s, cycle): (f64, f64, u64),
    ) -> Vec<TaskView<'a>> {
        let node_cpus = topo.all_cpus.len() as f64 / topo.nodes.len() as f64;
        let now_ms = (now_s * 1e3) as u64;
        tasks
            .iter()
            .filter_map(|t| {
                let mask = masks.get(&t.pid)?;
                let pinned_node = topo.node_containing(mask);
                let node = pinned_node.or_else(|| topo.node_of_cpu(t.processor))?;
                let reach = topo.reach(mask);
                let age = (uptime_s - t.starttime as f64 / self.hz).max(1e-3);
                let (ticks, faults, secs) = match (self.prev.get(&key(t)), self.prev_s) {
                    (Some(&(c, f)), Some(at)) => (
                        t.cpu_ticks.saturating_sub(c),
                        t.faults.saturating_sub(f),
                        now_s - at,
                    ),
                    _ => (t.cpu_ticks, t.faults, age),
                };
                let cpu_s = ticks as f64 / self.hz;
                let held =
                    self.cooldown.cooling(&key(t), now_ms) || self.backoff.waiting(&key(t), cycle);
                Some(TaskView {
                    task: t,
                    node,
                    reach,
                    pinned: pinned_node.is_some(),
                    usage: cpu_s / secs.max(1e-3) / node_cpus,
                    mai: faults as f64 / cpu_s.max(0.01),
                    movable: !held && age >= self.min_task_age_s,
                })
            })
            .collect()
    }

    /// Remembers the tasks' counters as of this look.
    pub fn remember(&mut self, tasks: &[BeTask], now_s: f64) {
        self.prev_s = Some(now_s);
        self.prev = tasks
            .iter()
            .map(|t| (key(t), (t.cpu_ticks, t.faults)))
            .collect();
    }

    /// `t` moved at `now_s`.
    pub fn moved(&mut self, t: &BeTask, now_s: f64) {
        self.cooldown.moved(key(t), (now_s * 1e3) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(pid: i32, ticks: u64, processor: usize) -> BeTask {
        BeTask {
            pid,
            comm: "be".into(),
            ppid: 1,
            starttime: 100,
            cpu_ticks: ticks,
            num_threads: 1,
            rss_pages: 0,
            faults: 0,
            processor,
            threads: None,
        }
    }

    #[test]
    fn usage_since_the_last_look_cool_down_and_age() {
        let topo = Topology::pseudo(&["0".into(), "1".into()]).unwrap();
        let mut v = Views::new(100.0, 2.0, 5.0, 4);
        let t = [task(7, 100, 1)];
        let masks = HashMap::from([(7, crate::cpuset::set("0-1"))]);
        // Started 1 s after boot, 101 s ago: lifetime use 100 ticks = 1 s over 100 s.
        let first = v.of(&t, &masks, &topo, (101.0, 0.0, 0));
        assert_eq!((first[0].node, first[0].pinned), (1, false));
        assert_eq!(first[0].reach.iter().collect::<Vec<_>>(), [0, 1]);
        assert!((first[0].usage - 0.01).abs() < 1e-9 && first[0].movable);
        v.remember(&t, 0.0);
        v.moved(&t[0], 0.0);
        let t = [task(7, 150, 1)];
        let masks = HashMap::from([(7, crate::cpuset::set("1"))]);
        let second = v.of(&t, &masks, &topo, (102.0, 1.0, 0));
        assert!((second[0].usage - 0.5).abs() < 1e-9, "50 ticks in 1 s");
        assert!(second[0].pinned && !second[0].movable, "cooling for 2 s");
        assert!(v.of(&t, &masks, &topo, (103.0, 2.0, 0))[0].movable);
        assert!(
            !v.of(&t, &masks, &topo, (3.0, 2.0, 0))[0].movable,
            "2 s old < 5 s"
        );
        assert!(
            v.of(&t, &HashMap::new(), &topo, (103.0, 2.0, 0)).is_empty(),
            "mask unknown"
        );
        // A move that did not take at cycle 10 holds it back for 4 cycles, cool-down or not.
        v.backoff.failed(key(&t[0]), 10);
        assert!(!v.of(&t, &masks, &topo, (103.0, 2.0, 13))[0].movable);
        assert!(v.of(&t, &masks, &topo, (103.0, 2.0, 14))[0].movable);
    }
}
