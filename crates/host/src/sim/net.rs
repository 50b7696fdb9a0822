//! The network workload (issue 14): one flow into a VM through a link with a one-way delay and a
//! bandwidth cap, a receive ring and a transmit ring of `ring_slots` (256) slots, and a guest that
//! drains the receive ring only while one of its vCPUs runs.
//!
//! **Time is cut into quanta** of `NET_QUANTUM` (1 ms; a scenario's `net_quantum_ms` may ask for
//! down to 1 µs, `RunConfig::net_quantum`): the engine calls `NetSim::tick` once per
//! quantum with the CPU time the VM had in the quantum just ended, and every packet moves in
//! batches of whole packets per quantum. At 160 Mbit/s that is ~13 packets per batch, so one
//! event per quantum replaces ~13 per-packet events; what is lost is where inside a quantum a
//! packet lands (latencies are quantised to 1 ms, and a packet arriving in a quantum may be
//! drained with service time from that same quantum). The order inside a tick is: replies and
//! ACKs arriving at the sender, the sender's output into the shaper, the shaper's output onto the
//! delay line, arrivals into the RX ring (drops when full), the guest's drain.
//!
//! - **Packets** are 1500-byte frames (12 000 bits); throughput counts data frames the guest
//!   drained. Pings are one slot each and not counted as throughput.
//! - **Link**: a drop-tail shaper queue of `LINK_BUFFER` packets emptied at `cap_mbit_s`
//!   (`tc tbf`), then `delay_ms` of propagation (`netem`). The return path (ACKs, echo replies)
//!   has the same delay and no cap.
//! - **RX ring**: packets wait in FIFO order; a packet arriving when all slots are taken is
//!   dropped. The guest drains `service / cpu_us_per_packet` packets per quantum, where
//!   `service` is the time its first vCPU ran (or, with `any_vcpu`, the time at least one of
//!   its vCPUs ran), times that core's speed; the engine charges the drained packets' CPU cost
//!   as extra work to that vCPU.
//! - **TX ring**: the guest posts one delayed ACK per two TCP data packets and one echo reply
//!   per ping; the backend (dom0, on its own cores) takes them at the next quantum.
//! - **UDP**: constant `rate_mbit_s` offered; losses at the shaper and the ring are counted.
//! - **TCP** (Reno's AIMD, in packets): initial window 10, at most `TCP_RWND` unacknowledged
//!   packets; slow start (+1 per ACKed packet) until the first loss, then each ACKed packet
//!   grows the window by 1/window (one packet per RTT); a loss (ring or shaper drop) is known
//!   to the sender one delay after it happened (ring) or one RTT after (shaper) and halves the
//!   window (and sets the slow-start threshold there), at most once per RTT (2 × delay + one
//!   quantum); lost packets leave the flight and are sent again as new data.
//! - **ICMP echo**: one 100-byte request every `ping_interval_ms` (100) through the same shaper and ring; the
//!   reply leaves when the guest drains the request. Latency = reply arrival − request sent.

use std::collections::VecDeque;

use super::time::{ms, Nanos, MS};
use crate::decide::diff::RingSample;
use colosched_core::Rng;

/// One network quantum (see the module doc).
pub const NET_QUANTUM: Nanos = MS;
/// Bits per data packet (a 1500-byte frame).
pub const PACKET_BITS: f64 = 12_000.0;
/// The shaper's queue, in packets (drop-tail).
pub const LINK_BUFFER: u64 = 256;
/// TCP's receive window, in packets (~3 MB).
pub const TCP_RWND: f64 = 2048.0;
/// TCP's initial window, in packets.
pub const TCP_INITIAL_WINDOW: f64 = 10.0;
/// The default time between ICMP echo requests.
pub const PING_INTERVAL: Nanos = 100 * MS;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Tcp,
    Udp,
    /// Only the pings.
    Icmp,
}

/// The parameters of a network workload (scenario keys of the same names).
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    pub protocol: Protocol,
    /// UDP's offered rate (ignored otherwise).
    pub rate_mbit_s: f64,
    /// One-way link delay.
    pub delay_ms: f64,
    /// The link's bandwidth cap.
    pub cap_mbit_s: f64,
    /// CPU work (speed-1 µs) the guest spends per packet it drains.
    pub cpu_us_per_packet: f64,
    /// CPU work each vCPU computes besides the network (restarted when done, keeping the VM
    /// CPU-saturated as in spec 002); `None`: the vCPUs only wake for packets.
    pub cpu_work_ms: Option<f64>,
    /// ICMP echo 10/s.
    pub ping: bool,
    pub ring_slots: u64,
    /// Time between pings (`PING_INTERVAL`, 100 ms, unless a scenario says otherwise).
    pub ping_interval_ms: f64,
    /// Spread of the gaps between pings: each is drawn uniformly from `ping_interval_ms` ×
    /// [1 − jitter, 1 + jitter] (0: a fixed interval). Random gaps, as a real client's, sample
    /// every phase of the host's ticks and slices; a fixed interval can lock onto one.
    pub ping_jitter: f64,
    /// Which vCPUs take the rings' interrupts and drain them: only the first (`false`, the
    /// default: netfront's event channel is bound to vCPU 0 and a single-queue NIC's NAPI polls
    /// where its interrupt lands) or any of the VM's vCPUs (`true`: interrupts follow whichever
    /// runs).
    pub any_vcpu: bool,
}

impl Network {
    /// A flow with the spec 002 link (30 ms, 160 Mbit/s), 256-slot rings, pings, and 1 s
    /// CPU-saturating programs.
    pub fn spec002(protocol: Protocol) -> Network {
        Network {
            protocol,
            rate_mbit_s: 200.0,
            delay_ms: 30.0,
            cap_mbit_s: 160.0,
            cpu_us_per_packet: 5.0,
            cpu_work_ms: Some(1000.0),
            ping: true,
            ring_slots: 256,
            ping_interval_ms: 100.0,
            ping_jitter: 0.0,
            any_vcpu: false,
        }
    }
}

/// A batch of packets; a ping travels alone, with the time it was sent.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Batch {
    n: u64,
    ping: Option<Nanos>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Back {
    Ack(u64),
    Loss(u64),
    Pong(Nanos),
}

/// TCP's window arithmetic (AIMD), apart from the packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tcp {
    /// Congestion window, packets.
    pub window: f64,
    /// Packets sent and neither acknowledged nor known lost.
    pub in_flight: u64,
    /// Slow-start threshold (packets): below it the window grows by one per ACKed packet.
    pub ssthresh: f64,
    last_halving: Option<Nanos>,
}

impl Tcp {
    pub fn new() -> Tcp {
        Tcp {
            window: TCP_INITIAL_WINDOW,
            in_flight: 0,
            ssthresh: f64::INFINITY,
            last_halving: None,
        }
    }

    /// Packets it may send now.
    pub fn can_send(&self) -> u64 {
        (self.window.min(TCP_RWND).floor() as u64).saturating_sub(self.in_flight)
    }

    /// `n` packets acknowledged: +1 each in slow start, else +1/window each (one per RTT).
    pub fn on_ack(&mut self, n: u64) {
        self.in_flight = self.in_flight.saturating_sub(n);
        for _ in 0..n.min(4096) {
            let step = if self.window < self.ssthresh {
                1.0
            } else {
                1.0 / self.window
            };
            self.window = (self.window + step).min(TCP_RWND);
        }
    }

    /// `n` packets known lost at `now`: they leave the flight; the window halves (floor 1) unless
    /// it already halved less than `rtt` ago.
    pub fn on_loss(&mut self, now: Nanos, n: u64, rtt: Nanos) {
        self.in_flight = self.in_flight.saturating_sub(n);
        if self
            .last_halving
            .is_none_or(|t| now >= t.saturating_add(rtt))
        {
            self.window = (self.window / 2.0).max(1.0);
            self.ssthresh = self.window;
            self.last_halving = Some(now);
        }
    }
}

impl Default for Tcp {
    fn default() -> Self {
        Tcp::new()
    }
}

/// Totals of one VM's flow over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetStats {
    /// Data packets the guest drained.
    pub delivered: u64,
    /// Packets (data and pings) that found the RX ring full.
    pub ring_drops: u64,
    /// Packets the shaper's full queue refused.
    pub link_drops: u64,
    /// Round-trip time of each answered ping, in ms.
    pub ping_ms: Vec<f64>,
    pub pings_sent: u64,
}

/// One VM's network state.
#[derive(Clone, Debug)]
pub struct NetSim {
    pub spec: Network,
    /// The time step (`RunConfig::net_quantum`; `NET_QUANTUM` unless the engine sets it).
    pub quantum: Nanos,
    pub tcp: Tcp,
    udp_credit: f64,
    next_ping: Nanos,
    shaper: VecDeque<Batch>,
    shaper_len: u64,
    shaper_credit: f64,
    to_ring: VecDeque<(Nanos, Batch)>,
    back: VecDeque<(Nanos, Back)>,
    /// Packets waiting in the RX ring, and the positions (in the count of packets ever
    /// inserted) of the pings among them.
    rx: u64,
    inserted: u64,
    drained: u64,
    rx_pings: VecDeque<(u64, Nanos)>,
    service_credit: f64,
    /// Replies and ACKs posted to the TX ring in the last quantum.
    tx: u64,
    drops_since_sample: u64,
    /// Draws the gaps between pings (`ping_jitter`).
    rng: Rng,
    pub stats: NetStats,
}

impl NetSim {
    /// A flow at rest; `seed` drives its random draws (the gaps between pings).
    pub fn new(spec: Network, seed: u64) -> NetSim {
        NetSim {
            spec,
            quantum: NET_QUANTUM,
            tcp: Tcp::new(),
            udp_credit: 0.0,
            next_ping: 0,
            shaper: VecDeque::new(),
            shaper_len: 0,
            shaper_credit: 0.0,
            to_ring: VecDeque::new(),
            back: VecDeque::new(),
            rx: 0,
            inserted: 0,
            drained: 0,
            rx_pings: VecDeque::new(),
            service_credit: 0.0,
            tx: 0,
            drops_since_sample: 0,
            rng: Rng::new(seed),
            stats: NetStats::default(),
        }
    }

    fn delay(&self) -> Nanos {
        ms(self.spec.delay_ms)
    }

    /// Packets waiting in the RX ring.
    pub fn rx_len(&self) -> u64 {
        self.rx
    }

    /// CPU work (speed-1 ns) per drained packet.
    pub fn cost_per_packet(&self) -> f64 {
        self.spec.cpu_us_per_packet * 1e3
    }

    /// The ring reading the monitor takes (spec 002 §3): rx_rq = packets in the RX ring not yet
    /// taken by the guest; rx_rr = 0 (the model returns a slot as soon as the guest takes its
    /// packet); rx_rqn = packets that arrived since the last reading and found the ring full
    /// (they were about to be inserted); tx_sq = replies and ACKs the guest posted in the last
    /// quantum, not yet taken by the backend. Starts a new count of drops.
    pub fn sample(&mut self) -> RingSample {
        let clamp = |x: u64| x.min(u32::MAX as u64) as u32;
        let s = RingSample {
            rx_rq: clamp(self.rx),
            rx_rr: 0,
            rx_rqn: clamp(self.drops_since_sample),
            tx_sq: clamp(self.tx),
        };
        self.drops_since_sample = 0;
        s
    }

    fn enqueue_link(&mut self, b: Batch, now: Nanos) {
        let room = LINK_BUFFER.saturating_sub(self.shaper_len);
        let n = b.n.min(room);
        let lost = b.n - n;
        if lost > 0 {
            self.stats.link_drops += lost;
            if self.spec.protocol == Protocol::Tcp && b.ping.is_none() {
                // The sender learns of it from duplicate ACKs, about one RTT later.
                let t = now.saturating_add(2 * self.delay());
                self.back.push_back((t, Back::Loss(lost)));
            }
        }
        if n > 0 {
            self.shaper_len += n;
            self.shaper.push_back(Batch { n, ping: b.ping });
        }
    }

    /// One quantum ending at `now`; `service` is the CPU work (speed-1 ns) the VM's vCPUs could
    /// give the rings in it. Returns the packets drained (their CPU cost is the caller's).
    pub fn tick(&mut self, now: Nanos, service: f64) -> u64 {
        let delay = self.delay();
        let rtt = (2 * delay).saturating_add(self.quantum);
        self.tx = 0;
        // 1. The sender hears back.
        while self.back.front().is_some_and(|&(t, _)| t <= now) {
            match self.back.pop_front().unwrap().1 {
                Back::Ack(n) => self.tcp.on_ack(n),
                Back::Loss(n) => self.tcp.on_loss(now, n, rtt),
                Back::Pong(sent) => self.stats.ping_ms.push((now - sent) as f64 / MS as f64),
            }
        }
        // 2. The sender sends.
        let q = self.quantum as f64 / 1e9;
        let data = match self.spec.protocol {
            Protocol::Tcp => {
                let n = self.tcp.can_send();
                self.tcp.in_flight += n;
                n
            }
            Protocol::Udp => {
                self.udp_credit += self.spec.rate_mbit_s * 1e6 / PACKET_BITS * q;
                let n = self.udp_credit.floor();
                self.udp_credit -= n;
                n as u64
            }
            Protocol::Icmp => 0,
        };
        if data > 0 {
            self.enqueue_link(
                Batch {
                    n: data,
                    ping: None,
                },
                now,
            );
        }
        if self.spec.ping && now >= self.next_ping {
            let spread = self.spec.ping_jitter * (2.0 * self.rng.next_f64() - 1.0);
            let gap = ms(self.spec.ping_interval_ms * (1.0 + spread));
            self.next_ping = now.saturating_add(gap);
            self.stats.pings_sent += 1;
            self.enqueue_link(
                Batch {
                    n: 1,
                    ping: Some(now),
                },
                now,
            );
        }
        // 3. The shaper sends what the cap allows onto the delay line.
        self.shaper_credit += self.spec.cap_mbit_s * 1e6 / PACKET_BITS * q;
        while let Some(b) = self.shaper.front_mut() {
            let n = b.n.min(self.shaper_credit.floor() as u64);
            if n == 0 {
                break;
            }
            self.shaper_credit -= n as f64;
            self.shaper_len -= n;
            let out = Batch { n, ping: b.ping };
            b.n -= n;
            if b.n == 0 {
                self.shaper.pop_front();
            }
            self.to_ring.push_back((now.saturating_add(delay), out));
        }
        if self.shaper.is_empty() {
            self.shaper_credit = self.shaper_credit.min(1.0);
        }
        // 4. Arrivals into the RX ring.
        while self.to_ring.front().is_some_and(|&(t, _)| t <= now) {
            let b = self.to_ring.pop_front().unwrap().1;
            let room = self.spec.ring_slots.saturating_sub(self.rx);
            let n = b.n.min(room);
            let lost = b.n - n;
            self.rx += n;
            self.inserted += n;
            if let (Some(sent), 1) = (b.ping, n) {
                self.rx_pings.push_back((self.inserted, sent));
            }
            if lost > 0 {
                self.stats.ring_drops += lost;
                self.drops_since_sample += lost;
                if self.spec.protocol == Protocol::Tcp && b.ping.is_none() {
                    self.back
                        .push_back((now.saturating_add(delay), Back::Loss(lost)));
                }
            }
        }
        // 5. The guest drains what its CPU time allowed.
        self.service_credit += service / self.cost_per_packet().max(1e-9);
        // (A hair over the floor: a vCPU that ran exactly one packet's cost drains it.)
        let n = ((self.service_credit + 1e-9).floor() as u64).min(self.rx);
        self.service_credit -= n as f64;
        if self.rx == n {
            // Service the ring could not use (the guest was idle) is not saved up, not even
            // the part of a packet: the next packet is not there yet, and its cost is paid
            // from when it is (else a request could be answered in less than its own cost).
            self.service_credit = 0.0;
        }
        self.rx -= n;
        self.drained += n;
        let mut pongs = 0;
        while self
            .rx_pings
            .front()
            .is_some_and(|&(pos, _)| pos <= self.drained)
        {
            let sent = self.rx_pings.pop_front().unwrap().1;
            pongs += 1;
            self.back
                .push_back((now.saturating_add(delay), Back::Pong(sent)));
        }
        let data = n - pongs;
        self.stats.delivered += data;
        if self.spec.protocol == Protocol::Tcp && data > 0 {
            self.back
                .push_back((now.saturating_add(delay), Back::Ack(data)));
            self.tx += data.div_ceil(2);
        }
        self.tx += pongs;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp(rate: f64, cap: f64, delay_ms: f64) -> NetSim {
        NetSim::new(
            Network {
                rate_mbit_s: rate,
                delay_ms,
                cap_mbit_s: cap,
                cpu_us_per_packet: 10.0,
                cpu_work_ms: None,
                ping: false,
                ..Network::spec002(Protocol::Udp)
            },
            1,
        )
    }

    #[test]
    fn tcp_halves_on_loss_once_per_rtt_and_grows_one_packet_per_rtt() {
        let mut t = Tcp::new();
        // Slow start: a window of ACKs doubles the window.
        t.in_flight = 10;
        t.on_ack(10);
        assert_eq!((t.window, t.in_flight), (20.0, 0));
        t.window = 40.0;
        t.in_flight = 40;
        t.on_loss(100, 3, 60 * MS);
        assert_eq!((t.window, t.in_flight, t.ssthresh), (20.0, 37, 20.0));
        t.on_loss(100 + 30 * MS, 1, 60 * MS); // same RTT: no second halving
        assert_eq!(t.window, 20.0);
        t.on_loss(100 + 60 * MS, 1, 60 * MS);
        assert_eq!(t.window, 10.0);
        // A whole window acknowledged: about one packet more.
        t.in_flight = 10;
        t.on_ack(10);
        assert!((t.window - 11.0).abs() < 0.05, "{}", t.window);
        assert_eq!((t.in_flight, t.can_send()), (0, 10));
        let mut one = Tcp::new();
        one.window = 1.5;
        one.on_loss(0, 1, MS);
        assert_eq!(one.window, 1.0);
    }

    #[test]
    fn udp_behind_the_cap_arrives_one_delay_later_at_the_cap_rate() {
        // 120 Mbit/s = 10 packets per ms offered, cap 60 Mbit/s = 5 per ms, 5 ms delay.
        let mut n = udp(120.0, 60.0, 5.0);
        let mut drained = Vec::new();
        for k in 0..80u64 {
            drained.push(n.tick(k * MS, 1e9));
        }
        assert!(drained[..5].iter().all(|&d| d == 0), "{drained:?}");
        assert!(drained[5..].iter().all(|&d| d == 5), "{drained:?}");
        // The shaper's queue fills (5 more per ms) and then drops.
        assert!(n.stats.link_drops > 0 && n.stats.ring_drops == 0);
    }

    #[test]
    fn the_ring_overflows_when_the_guest_does_not_run_for_longer_than_ring_over_rate() {
        // 10 packets per ms; the guest does not run for 30 ms: 300 > 256 slots.
        let mut n = udp(120.0, 1000.0, 1.0);
        for k in 0..31u64 {
            n.tick(k * MS, 0.0);
        }
        assert_eq!(n.rx_len(), 256);
        assert_eq!(n.stats.ring_drops, 300 - 256);
        let s = n.sample();
        assert_eq!((s.rx_rq, s.rx_rqn), (256, 44));
        assert_eq!(n.sample().rx_rqn, 0);
        // 20 ms without service: 200 < 256, nothing lost.
        let mut m = udp(120.0, 1000.0, 1.0);
        for k in 0..21u64 {
            m.tick(k * MS, 0.0);
        }
        assert_eq!((m.rx_len(), m.stats.ring_drops), (200, 0));
        // Service drains 1 packet per 10 µs of CPU.
        assert_eq!(m.tick(21 * MS, 100_000.0), 10);
    }

    #[test]
    fn ping_rtt_is_two_delays_plus_the_wait_for_the_guest() {
        let mut n = NetSim::new(
            Network {
                protocol: Protocol::Icmp,
                ping: true,
                delay_ms: 10.0,
                ..Network::spec002(Protocol::Icmp)
            },
            1,
        );
        // The guest runs always: RTT = 2 × 10 ms.
        for k in 0..=20u64 {
            n.tick(k * MS, 1e6);
        }
        assert_eq!(n.stats.ping_ms, vec![20.0]);
        // The next ping (sent at 100 ms) waits in the ring until the guest runs at 125 ms.
        for k in 21..=200u64 {
            let t = k * MS;
            let service = if (110..125).contains(&k) { 0.0 } else { 1e6 };
            n.tick(t, service);
        }
        assert_eq!(n.stats.ping_ms, vec![20.0, 35.0]);
    }
}
