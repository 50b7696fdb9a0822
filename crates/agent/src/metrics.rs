//! Prometheus text exposition at `/metrics`, served by one small thread on a std TcpListener.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::io::{BufRead, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds (seconds) of the cycle-duration histogram buckets.
const BUCKETS: [f64; 8] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.25, 1.0];

#[derive(Debug, Default)]
pub struct Metrics {
    pub sensor: String,
    /// Per node of the last cycle: (node id, load, steal ticks).
    pub nodes: Vec<(usize, f64, f64)>,
    /// Busy sensor, per node of the last cycle: (node id, LC usage, LC run-queue wait).
    pub lc: Vec<(usize, Option<f64>, Option<f64>)>,
    pub be_tasks: usize,
    pub cycles: u64,
    pub moves: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
    cycle_buckets: [u64; BUCKETS.len()],
    cycle_sum: f64,
    cycle_count: u64,
}

impl Metrics {
    pub fn observe_cycle(&mut self, seconds: f64) {
        for (i, &b) in BUCKETS.iter().enumerate() {
            if seconds <= b {
                self.cycle_buckets[i] += 1;
            }
        }
        self.cycle_sum += seconds;
        self.cycle_count += 1;
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let mut family = |name: &str, kind: &str, help: &str| {
            let _ = writeln!(
                s,
                "# HELP colosched_agent_{name} {help}\n# TYPE colosched_agent_{name} {kind}"
            );
        };
        family(
            "node_load",
            "gauge",
            "LC pressure per node, as a fraction of its CPUs",
        );
        family(
            "node_lc_usage",
            "gauge",
            "Busy sensor: CPU time LC ran on the node over the last interval, as a fraction of its CPUs",
        );
        family(
            "node_lc_wait",
            "gauge",
            "Busy sensor: time LC threads waited on the node's run queues over the last interval, as a fraction of its CPUs (absent while not measured: no BE task ran)",
        );
        family(
            "node_steal_ticks",
            "gauge",
            "Steal ticks per node over the last interval",
        );
        family(
            "be_tasks",
            "gauge",
            "Best-effort processes selected in the last cycle",
        );
        family("cycles_total", "counter", "Cycles run");
        family("moves_total", "counter", "Tasks moved, by reason");
        family(
            "errors_total",
            "counter",
            "Errors by kind (esrch, einval, eperm, eio, selector, other)",
        );
        family(
            "cycle_duration_seconds",
            "histogram",
            "Wall time of one cycle",
        );
        for (n, l, st) in &self.nodes {
            let _ = writeln!(
                s,
                "colosched_agent_node_load{{node=\"{n}\",sensor=\"{}\"}} {l}",
                self.sensor
            );
            let _ = writeln!(s, "colosched_agent_node_steal_ticks{{node=\"{n}\"}} {st}");
        }
        for (n, usage, wait) in &self.lc {
            if let Some(u) = usage {
                let _ = writeln!(s, "colosched_agent_node_lc_usage{{node=\"{n}\"}} {u}");
            }
            if let Some(w) = wait {
                let _ = writeln!(s, "colosched_agent_node_lc_wait{{node=\"{n}\"}} {w}");
            }
        }
        let _ = writeln!(s, "colosched_agent_be_tasks {}", self.be_tasks);
        let _ = writeln!(s, "colosched_agent_cycles_total {}", self.cycles);
        for (reason, v) in &self.moves {
            let _ = writeln!(s, "colosched_agent_moves_total{{reason=\"{reason}\"}} {v}");
        }
        for (kind, v) in &self.errors {
            let _ = writeln!(s, "colosched_agent_errors_total{{kind=\"{kind}\"}} {v}");
        }
        for (b, c) in BUCKETS.iter().zip(self.cycle_buckets) {
            let _ = writeln!(
                s,
                "colosched_agent_cycle_duration_seconds_bucket{{le=\"{b}\"}} {c}"
            );
        }
        let _ = writeln!(
            s,
            "colosched_agent_cycle_duration_seconds_bucket{{le=\"+Inf\"}} {}",
            self.cycle_count
        );
        let _ = writeln!(
            s,
            "colosched_agent_cycle_duration_seconds_sum {}",
            self.cycle_sum
        );
        let _ = writeln!(
            s,
            "colosched_agent_cycle_duration_seconds_count {}",
            self.cycle_count
        );
        s
    }
}

/// Binds `addr` and serves `GET /metrics` from a background thread. Binding errors are returned
/// (an operator asked for the endpoint; silently not having it would mislead).
pub fn serve(addr: SocketAddr, metrics: Arc<Mutex<Metrics>>) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr).map_err(|e| format!("metrics.listen {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                let mut line = String::new();
                if BufReader::new(&stream).read_line(&mut line).is_err() {
                    continue;
                }
                let (status, body) = if line.starts_with("GET /metrics") {
                    ("200 OK", metrics.lock().map(|m| m.render()).unwrap_or_default())
                } else {
                    ("404 Not Found", "try /metrics\n".to_string())
                };
                let mut stream = stream;
                let _ = write!(stream, "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn serves_prometheus_text_on_loopback() {
        let mut metrics = Metrics::default();
        (metrics.sensor, metrics.nodes) = ("busy".into(), vec![(0, 0.5, 0.0), (1, 0.1, 3.0)]);
        metrics.lc = vec![(0, Some(0.2), Some(0.3)), (1, Some(0.1), None)];
        let m = Arc::new(Mutex::new(metrics));
        m.lock().unwrap().observe_cycle(0.0007);
        m.lock().unwrap().moves.insert("coarse".into(), 4);
        let addr = serve("127.0.0.1:0".parse().unwrap(), m).unwrap();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.0 200 OK"), "{out}");
        assert!(out.contains("colosched_agent_node_load{node=\"0\",sensor=\"busy\"} 0.5"));
        assert!(out.contains("colosched_agent_moves_total{reason=\"coarse\"} 4"));
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
