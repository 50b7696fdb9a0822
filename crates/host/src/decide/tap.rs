//! Spec 002's ring samples from what a Linux host can see of a VM's network: the counters of its
//! tap devices over one sampling interval, and, where QEMU exposes it, how full the guest's
//! virtio RX ring is. Pure functions: the real host agent calls them with the deltas its sensors
//! read; the simulator could call them with counts of its own.
//!
//! Names here are the guest's. A tap *transmits* toward the guest and *receives* what the guest
//! sends, so `to_guest_dropped` is the tap's `tx_dropped` and `from_guest` its `rx_packets`:
//! the two counters the mapping needs, and the only two the real agent reads every T_m.
//!
//! # The mapping, and why
//!
//! The paper reads ring lengths every T_m (10 ms); a tap gives packet and drop counts. Each
//! interval becomes one [`RingSample`]:
//!
//! - **RX overflow** (eq. 5): the tap dropped packets toward the guest in the interval
//!   (`to_guest_dropped > 0`) → `rx_rq = QL_max`, `rx_rqn` = the drops (clamped). A tap drops
//!   toward the guest only when its own queue is full (`tx_queue_len`: 1000 packets when QEMU
//!   makes the tap, 500 when `ip tuntap` does), and it fills only while QEMU has stopped reading
//!   it because the guest's RX ring has no free buffer: a drop is proof that the ring was full,
//!   the paper's overflow. (Checked on this machine: a stopped guest's tap counts 1,002
//!   `tx_dropped` of 2,000 datagrams and `tx_packets` stays at 1, since a tap counts
//!   `tx_packets` only when QEMU reads the packet.) The signal is late —
//!   the ring and the tap's queue must both fill — so overflow is seen less often than the
//!   paper's ring would show it, never more.
//! - **RX overload** (eq. 6): needs a queue length, which no counter gives (packets delivered in
//!   an interval are a rate: a guest keeping up at 160 Mbit/s takes ~130 per 10 ms with an empty
//!   ring). So `rx_rq` is the ring fill when the caller knows it (`rx_queued`, e.g. from QMP's
//!   `x-query-virtio-queue-status` through [`virtio_rx_fill`]), else 0: without it, overload is
//!   never reported and RX sensitivity rests on overflows alone. (Asking QMP every 10 ms is not
//!   free: on this machine one `x-query-virtio-queue-status` costs QEMU's main loop about
//!   0.5 ms of CPU, 5 % of a CPU per VM at 10 ms; it suits a few VMs, or a slower cadence.)
//! - **TX** (eqs 9–10): `tx_sq` = the packets the guest sent in the interval (`from_guest`),
//!   scaled to the nominal period T_m and clamped to QL_max. A zero interval is a stall; the
//!   non-zero ones give q_se. So a VM is TX-sensitive when more than half of its intervals carry
//!   nothing (γ_th) and the others average more than QL_cth (45) packets: a sender that moves in
//!   big bursts between long silences — the paper's "stagnate" state of a vCPU that waits on
//!   the run queue. A steady sender is never zero (f_se = 0) and an idle or trickling VM never
//!   averages 45 (q_se ≤ its trickle), so neither is flagged. That is also why no separate "its
//!   recent rate was non-zero" condition is needed for a stall: q_se is computed from the same
//!   window's non-zero samples, so a window without traffic has q_se = 0 and is not sensitive.
//!   Counting the packets posted since the last look over-states the paper's instantaneous
//!   queue (QEMU drains the TX ring at once); the q_se threshold may want tuning on real
//!   traffic.
//!
//! A VM with several taps has their counts summed: a drop on any of them is an overflow.
//! `rx_rr` is always 0 (a tap has no response queue to read).

use super::diff::RingSample;

/// One interval's counter deltas of a VM's taps (summed over them), named from the guest's side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapDelta {
    /// Packets the tap dropped toward the guest because its queue was full (`tx_dropped`).
    pub to_guest_dropped: u64,
    /// Packets the guest sent (the tap's `rx_packets`).
    pub from_guest: u64,
}

impl std::ops::AddAssign for TapDelta {
    fn add_assign(&mut self, o: TapDelta) {
        self.to_guest_dropped += o.to_guest_dropped;
        self.from_guest += o.from_guest;
    }
}

/// What one sampling interval says about a VM's network.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapInterval {
    pub delta: TapDelta,
    /// How long the interval really was, ns (the daemon's 10 ms tick may run late); 0 = the
    /// nominal period.
    pub interval_ns: u64,
    /// The guest's RX ring fill at the end of the interval, already scaled to QL_max, when known
    /// (see [`virtio_rx_fill`]).
    pub rx_queued: Option<u32>,
}

/// The paper's ring sample for one interval (see the module doc for the mapping and why).
/// `period_ns` is T_m, the nominal sampling period the TX count is scaled to; `ql_max` the
/// ring capacity readings are clamped to.
pub fn ring_sample(iv: &TapInterval, period_ns: u64, ql_max: u32) -> RingSample {
    let clamp = |x: u64| x.min(ql_max as u64) as u32;
    let tx_sq = clamp(scale_to_period(
        iv.delta.from_guest,
        iv.interval_ns,
        period_ns,
    ));
    if iv.delta.to_guest_dropped > 0 {
        RingSample {
            rx_rq: ql_max,
            rx_rr: 0,
            rx_rqn: clamp(iv.delta.to_guest_dropped),
            tx_sq,
        }
    } else {
        RingSample {
            rx_rq: iv.rx_queued.unwrap_or(0).min(ql_max),
            rx_rr: 0,
            rx_rqn: 0,
            tx_sq,
        }
    }
}

/// `count` seen over `interval_ns`, as if seen over `period_ns` (rounded to nearest): a tick
/// that came 10 ms late does not double the packets in a "10 ms" sample.
fn scale_to_period(count: u64, interval_ns: u64, period_ns: u64) -> u64 {
    if interval_ns == 0 || interval_ns == period_ns {
        return count;
    }
    let scaled =
        (count as u128 * period_ns as u128 + interval_ns as u128 / 2) / interval_ns as u128;
    scaled.min(u64::MAX as u128) as u64
}

/// How full a virtio-net RX queue is, scaled to `ql_max`, from the indices QEMU reports
/// (`x-query-virtio-queue-status`): the guest posts empty buffers (`avail`), QEMU fills them
/// (`last_avail_idx` counts those taken); `shadow_avail_idx - last_avail_idx` buffers are posted
/// and still free, and the rest of the `vring_num` slots hold packets the guest has not taken
/// back yet — the paper's request queue.
///
/// `None` when the queue is not set up (`vring_desc` = 0: the guest has not started its driver)
/// or has no slots.
///
/// Caveats, so a caller knows what it is reading: the capacity is taken as `vring_num` buffers,
/// which holds for Linux's mergeable RX buffers (its default: one descriptor per buffer) but not
/// for its "big packets" mode, where a buffer chains many descriptors and the ring is never
/// seen with more than a few free; and `shadow_avail_idx` is QEMU's cached copy of the guest's
/// index, refreshed when QEMU looks for a buffer (with mergeable buffers, at every packet it
/// receives), so between packets the fill reads as it was at the last packet.
pub fn virtio_rx_fill(
    vring_num: u32,
    vring_desc: u64,
    last_avail_idx: u16,
    shadow_avail_idx: u16,
    ql_max: u32,
) -> Option<u32> {
    if vring_desc == 0 || vring_num == 0 {
        return None;
    }
    let free = (shadow_avail_idx.wrapping_sub(last_avail_idx) as u32).min(vring_num);
    let filled = vring_num - free;
    Some(((filled as u64 * ql_max as u64 + vring_num as u64 / 2) / vring_num as u64) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::diff::{window_stats, NsvmThresholds, VmKind};

    const TM: u64 = 10_000_000;

    fn iv(dropped: u64, from_guest: u64) -> TapInterval {
        TapInterval {
            delta: TapDelta {
                to_guest_dropped: dropped,
                from_guest,
            },
            interval_ns: TM,
            rx_queued: None,
        }
    }

    fn sample(i: TapInterval) -> RingSample {
        ring_sample(&i, TM, 256)
    }

    #[test]
    fn a_drop_toward_the_guest_is_an_overflow() {
        let s = sample(iv(3, 0));
        assert_eq!((s.rx_rq, s.rx_rr, s.rx_rqn), (256, 0, 3));
        let huge = sample(iv(10_000, 0));
        assert_eq!((huge.rx_rq, huge.rx_rqn), (256, 256), "drops are clamped");
        // Even when the caller read a lower fill: the drop is the stronger evidence.
        let s = sample(TapInterval {
            rx_queued: Some(40),
            ..iv(1, 0)
        });
        assert_eq!(s.rx_rq, 256);
    }

    #[test]
    fn without_a_drop_only_a_known_fill_is_a_queue() {
        // A guest keeping up at 160 Mbit/s (130 packets delivered per 10 ms, which the mapping
        // does not read): no drop, no fill known → an empty ring.
        let s = sample(iv(0, 65));
        assert_eq!((s.rx_rq, s.rx_rr, s.rx_rqn), (0, 0, 0));
        let s = sample(TapInterval {
            rx_queued: Some(170),
            ..iv(0, 0)
        });
        assert_eq!(s.rx_rq, 170);
        let s = sample(TapInterval {
            rx_queued: Some(999),
            ..iv(0, 0)
        });
        assert_eq!(s.rx_rq, 256, "clamped to QL_max");
    }

    #[test]
    fn tx_is_the_guests_sends_per_nominal_period() {
        assert_eq!(sample(iv(0, 0)).tx_sq, 0, "a stall");
        assert_eq!(sample(iv(0, 60)).tx_sq, 60);
        assert_eq!(sample(iv(0, 5_000)).tx_sq, 256, "clamped");
        // A tick 10 ms late saw 20 ms of sends: halved back to one period.
        let late = TapInterval {
            interval_ns: 2 * TM,
            ..iv(0, 61)
        };
        assert_eq!(sample(late).tx_sq, 31);
        let early = TapInterval {
            interval_ns: TM / 2,
            ..iv(0, 20)
        };
        assert_eq!(sample(early).tx_sq, 40);
        let unknown = TapInterval {
            interval_ns: 0,
            ..iv(0, 7)
        };
        assert_eq!(sample(unknown).tx_sq, 7, "0 = the nominal period");
        assert_eq!(scale_to_period(u64::MAX, 1, TM), u64::MAX, "no overflow");
    }

    #[test]
    fn windows_of_mapped_samples_classify_as_the_paper_would() {
        let t = NsvmThresholds::default();
        let classify = |ivs: Vec<TapInterval>| {
            let samples: Vec<RingSample> = ivs.into_iter().map(sample).collect();
            window_stats(&t, &samples)
        };
        // A steady receiver and sender (Queue-0): never a drop, never a silent interval.
        let steady = classify(vec![iv(0, 65); 10]);
        assert_eq!(steady.kind(), VmKind::NotSensitive);
        // A CPU-only VM: silent throughout, q_se = 0.
        let idle = classify(vec![iv(0, 0); 10]);
        assert_eq!(idle.kind(), VmKind::NotSensitive);
        assert_eq!(idle.tx_stall_freq, 1.0);
        // A trickle with many silences: mean burst 2 ≤ 45.
        let mut trickle = vec![iv(0, 0); 10];
        trickle[3] = iv(0, 2);
        assert_eq!(classify(trickle).kind(), VmKind::NotSensitive);
        // A receiver whose vCPU waits: drops in 3 of 10 intervals > δ_th = 0.2.
        let mut flooded = vec![iv(0, 65); 10];
        for k in [1, 4, 7] {
            flooded[k] = iv(40, 0);
        }
        let s = classify(flooded);
        assert!(s.rx_sensitive && s.rx_overflow_freq == 0.3, "{s:?}");
        // Two drops in ten are not "more than a fifth".
        let mut two = vec![iv(0, 65); 10];
        two[0] = iv(1, 65);
        two[5] = iv(1, 65);
        assert!(!classify(two).rx_sensitive);
        // A sender stalled 6 intervals in 10, bursting 80 packets when it runs.
        let mut bursty = vec![iv(0, 0); 10];
        for k in [0, 3, 6, 9] {
            bursty[k] = iv(0, 80);
        }
        let s = classify(bursty);
        assert!(s.tx_sensitive && !s.rx_sensitive, "{s:?}");
        assert_eq!(s.kind(), VmKind::Sensitive);
        // The same with the fill known: overload in 7 of 10 intervals > θ_th = 0.6.
        let mut loaded = vec![iv(0, 65); 10];
        for l in loaded.iter_mut().take(7) {
            l.rx_queued = Some(200);
        }
        assert!(classify(loaded).rx_sensitive);
    }

    #[test]
    fn deltas_add_up_over_taps() {
        let mut d = TapDelta {
            to_guest_dropped: 2,
            from_guest: 3,
        };
        d += d;
        assert_eq!(
            d,
            TapDelta {
                to_guest_dropped: 4,
                from_guest: 6,
            }
        );
    }

    #[test]
    fn virtio_fill_from_queue_indices() {
        // All 256 buffers posted and free: empty.
        assert_eq!(virtio_rx_fill(256, 0x1000, 100, 356, 256), Some(0));
        // QEMU took 200 of them and the guest has given none back.
        assert_eq!(virtio_rx_fill(256, 0x1000, 300, 356, 256), Some(200));
        // No free buffer: full.
        assert_eq!(virtio_rx_fill(256, 0x1000, 356, 356, 256), Some(256));
        // The 16-bit indices wrap.
        assert_eq!(virtio_rx_fill(256, 0x1000, 65_500, 20, 256), Some(200));
        // A 1024-slot ring half full reads as half of QL_max.
        assert_eq!(virtio_rx_fill(1024, 0x1000, 0, 512, 256), Some(128));
        // More "free" than slots (a stale index) is no fill, not an underflow.
        assert_eq!(virtio_rx_fill(256, 0x1000, 0, 1000, 256), Some(0));
        // Not set up (a guest that has not started, as `-S` leaves it): unknown.
        assert_eq!(virtio_rx_fill(256, 0, 0, 0, 256), None);
        assert_eq!(virtio_rx_fill(0, 0x1000, 0, 0, 256), None);
    }
}
