//! A VM's virtio-net RX rings, read through its QEMU monitor: the ring fill spec 002's overload
//! test needs (`decide::tap::virtio_rx_fill` turns a queue's indices into it).

use std::fmt;

use colosched_qemu::{Monitor, QmpError};

use crate::decide::tap::virtio_rx_fill;

/// A VM's virtio-net RX rings, read through its monitor (a QMP socket, or libvirt): spec 002's
/// receive request queue (see `decide::tap::virtio_rx_fill` for what the indices mean). Only queue 0 of each device
/// is read (a multi-queue device's other RX queues are 2, 4, …). Each read costs QEMU's main
/// loop about 0.5 ms of CPU on this machine (`examples/host_sense_cost.rs`).
pub struct RxRings {
    qmp: Box<dyn Monitor>,
    paths: Vec<String>,
}

impl fmt::Debug for RxRings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxRings")
            .field("peer", &self.qmp.peer())
            .field("paths", &self.paths)
            .finish()
    }
}

impl RxRings {
    /// Finds the VM's virtio-net devices. Fails when QEMU has no `x-query-virtio` (before 7.2)
    /// or the VM has no virtio-net device.
    pub fn new(mut qmp: Box<dyn Monitor>) -> Result<RxRings, String> {
        let devices = qmp.query_virtio().map_err(|e| {
            if e.is_command_not_found() {
                let v = qmp.version();
                format!(
                    "QEMU {}.{}.{} has no x-query-virtio: its rings cannot be read (QEMU ≥ 7.2 has it)",
                    v.major, v.minor, v.micro
                )
            } else {
                e.to_string()
            }
        })?;
        let paths: Vec<String> = devices
            .into_iter()
            .filter(|d| d.name == "virtio-net")
            .map(|d| d.path)
            .collect();
        if paths.is_empty() {
            return Err(format!("{}: no virtio-net device", qmp.peer()));
        }
        Ok(RxRings { qmp, paths })
    }

    /// The fullest of the RX rings, scaled to `ql_max`; `None` while no guest driver has set
    /// one up.
    pub fn fill(&mut self, ql_max: u32) -> Result<Option<u32>, QmpError> {
        let mut most = None;
        for path in &self.paths {
            let q = self.qmp.virtio_queue_status(path, 0)?;
            let (Some(last), Some(shadow)) = (q.last_avail_idx, q.shadow_avail_idx) else {
                continue; // vhost: QEMU does not see the indices
            };
            let fill = virtio_rx_fill(q.vring_num, q.vring_desc, last, shadow, ql_max);
            most = most.max(fill);
        }
        Ok(most)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use colosched_qemu::testing::{greeting, qmp_server as server, ret, Qemu, QemuOpts, QUEUE};
    use colosched_qemu::Qmp;
    use serde_json::Value;
    use std::time::Duration;

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn rx_rings_read_the_fullest_virtio_net_rx_queue_and_refuse_a_qemu_without_them() {
        // Two NICs and a disk; the guest's driver posted 256 buffers on nic0 of which QEMU has
        // filled 200 (56 free: 200 of 256 slots hold packets) and 16 on nic1.
        let queue = |last: u32, shadow: u32| {
            ret(&QUEUE
                .replace("\"vring-desc\": 0", "\"vring-desc\": 4096")
                .replace(
                    "\"last-avail-idx\": 0",
                    &format!("\"last-avail-idx\": {last}"),
                )
                .replace(
                    "\"shadow-avail-idx\": 0",
                    &format!("\"shadow-avail-idx\": {shadow}"),
                ))
        };
        let devices = r#"[{"name": "virtio-net", "path": "/n0"}, {"name": "virtio-blk", "path": "/b"}, {"name": "virtio-net", "path": "/n1"}]"#;
        let replies = vec![
            ret("{}"),
            ret(devices),
            queue(65_530, 65_530u32.wrapping_add(56) % 65_536),
            queue(1000, 1240),
        ];
        let (path, _dir, t) = server(Some(&greeting()), replies);
        let mut rings = RxRings::new(Box::new(Qmp::connect(&path, T).unwrap())).unwrap();
        assert_eq!(
            rings.fill(256).unwrap(),
            Some(200),
            "the fuller one, across the wrap"
        );
        drop(rings);
        let seen = t.join().unwrap();
        let paths: Vec<&Value> = seen[2..].iter().map(|c| &c["arguments"]["path"]).collect();
        assert_eq!(paths, ["/n0", "/n1"], "only the virtio-net devices");

        let not_found =
            "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"no\"}, \"id\": {id}}\r\n";
        let (path, _dir, _t) = server(Some(&greeting()), vec![ret("{}"), not_found.into()]);
        let e = RxRings::new(Box::new(Qmp::connect(&path, T).unwrap())).unwrap_err();
        assert_eq!(
            e,
            "QEMU 7.2.22 has no x-query-virtio: its rings cannot be read (QEMU ≥ 7.2 has it)"
        );
        let (path, _dir, _t) = server(Some(&greeting()), vec![ret("{}"), ret("[]")]);
        let e = RxRings::new(Box::new(Qmp::connect(&path, T).unwrap())).unwrap_err();
        assert!(e.ends_with("qmp.sock: no virtio-net device"), "{e}");
    }

    #[test]
    fn a_real_qemu_has_one_virtio_net_ring_and_no_fill_before_its_driver_runs() {
        let q = Qemu::spawn(&QemuOpts {
            name: "rings",
            smp: 1,
            tap: Some("cst3"),
        });
        let mut rings = RxRings::new(Box::new(Qmp::connect(&q.qmp, T).unwrap())).unwrap();
        assert_eq!(rings.paths, ["/machine/peripheral/nic0/virtio-backend"]);
        assert_eq!(rings.fill(256).unwrap(), None);
    }
}
