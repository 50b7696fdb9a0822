//! Test support for this crate and the crates that use it (the `testing` feature): a fake QMP
//! server answering with recorded replies, and a real QEMU.
//!
//! The real QEMU: TCG, stopped before its first instruction (`-S`), no disk, no
//! display, a QMP and a human-monitor socket in a tempdir, vCPU threads named
//! (`debug-threads=on`). With a tap, it
//! runs in a network and mount namespace of its own (`unshare -n -m`) with sysfs mounted for that
//! namespace, so the tap, its address and the traffic sent to it never touch the host's network.
//! Dropping it kills and reaps QEMU; the namespaces and the tap go with it.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const QEMU_BIN: &str = "/usr/bin/qemu-system-x86_64";
/// The address of the host's end of the test tap, and the (static) neighbour behind it.
pub const TAP_HOST_IP: &str = "10.9.0.1";
pub const TAP_GUEST_IP: &str = "10.9.0.2";

pub struct QemuOpts<'a> {
    pub name: &'a str,
    pub smp: u32,
    /// A tap of this name in a namespace of QEMU's own.
    pub tap: Option<&'a str>,
}

pub struct Qemu {
    pub pid: i32,
    pub qmp: PathBuf,
    /// A human monitor (HMP) socket: not QMP.
    pub hmp: PathBuf,
    child: Child,
    dir: tempfile::TempDir,
}

impl Qemu {
    /// Starts QEMU and waits until its QMP socket exists and its vCPU threads are named.
    /// Fails (with QEMU's output) if that takes more than 20 s.
    pub fn spawn(o: &QemuOpts) -> Qemu {
        assert!(
            Path::new(QEMU_BIN).exists(),
            "{QEMU_BIN} is missing: these tests need QEMU (apt-get install qemu-system-x86)"
        );
        let dir = tempfile::tempdir().unwrap();
        let qmp = dir.path().join("qmp.sock");
        let hmp = dir.path().join("hmp.sock");
        let log = std::fs::File::create(dir.path().join("qemu.log")).unwrap();
        let mut args: Vec<String> = [
            QEMU_BIN,
            "-machine",
            "q35,accel=tcg",
            "-S",
            "-nodefaults",
            "-display",
            "none",
            "-m",
            "64",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push("-smp".into());
        args.push(o.smp.to_string());
        args.push("-name".into());
        args.push(format!("guest={},debug-threads=on", o.name));
        args.push("-qmp".into());
        args.push(format!("unix:{},server=on,wait=off", qmp.display()));
        args.push("-monitor".into());
        args.push(format!("unix:{},server=on,wait=off", hmp.display()));
        let mut cmd = if let Some(tap) = o.tap {
            args.push("-netdev".into());
            args.push(format!("tap,id=n0,ifname={tap},script=no,downscript=no"));
            args.push("-device".into());
            args.push("virtio-net-pci,netdev=n0,id=nic0".into());
            // The tap is made (and given an address and a static neighbour, so datagrams to
            // that neighbour go out through it) before QEMU attaches to it.
            let script = format!(
                "set -e; mount -t sysfs sysfs /sys; ip link set lo up; \
                 ip tuntap add dev {tap} mode tap; ip link set {tap} up; \
                 ip addr add {TAP_HOST_IP}/24 dev {tap}; \
                 ip neigh add {TAP_GUEST_IP} lladdr 52:54:00:00:00:02 dev {tap} nud permanent; \
                 exec \"$@\""
            );
            let mut c = Command::new("unshare");
            c.args(["-n", "-m", "--", "sh", "-c", &script, "sh"]);
            c.args(&args);
            c
        } else {
            let mut c = Command::new(&args[0]);
            c.args(&args[1..]);
            c
        };
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn qemu");
        let mut q = Qemu {
            pid: child.id() as i32,
            qmp,
            hmp,
            child,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = q.child.try_wait() {
                panic!("qemu exited ({status}) before it was ready:\n{}", q.log());
            }
            let ready = q.qmp.exists()
                && crate::discover::read_vm(Path::new("/proc"), q.pid)
                    .is_some_and(|vm| vm.vcpus.len() == o.smp as usize);
            if ready {
                return q;
            }
            assert!(
                Instant::now() < deadline,
                "qemu not ready in 20 s:\n{}",
                q.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("qemu.log")).unwrap_or_default()
    }

    /// sysfs as QEMU's network namespace shows it (its mount namespace has it mounted there).
    pub fn sys_root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/root/sys", self.pid))
    }

    /// Sends `n` small UDP datagrams through the tap toward the (stopped) guest, from a thread
    /// that has joined QEMU's network namespace.
    pub fn send_to_guest(&self, n: usize) {
        let ns = std::fs::File::open(format!("/proc/{}/ns/net", self.pid)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&ns),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .expect("setns into qemu's network namespace");
                let sock = std::net::UdpSocket::bind((TAP_HOST_IP, 0)).unwrap();
                for _ in 0..n {
                    // ENOBUFS from a full queue is possible and harmless: the count is a floor.
                    let _ = sock.send_to(&[0u8; 64], (TAP_GUEST_IP, 9));
                }
            })
            .join()
            .unwrap();
        });
    }
}

impl Drop for Qemu {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// Replies recorded from QEMU 7.2.22 (this machine's), `-machine q35,accel=tcg -S -smp 2` with a
// virtio-net-pci device.
pub const GREETING: &str = r#"{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}"#;
/// `x-query-virtio-queue-status` of its RX queue, before the guest's driver set it up.
pub const QUEUE: &str = r#"{"signalled-used": 0, "inuse": 0, "name": "virtio-net", "vring-align": 4096, "vring-desc": 0, "signalled-used-valid": false, "vring-num-default": 256, "vring-avail": 0, "queue-index": 0, "last-avail-idx": 0, "vring-used": 0, "used-idx": 0, "shadow-avail-idx": 0, "vring-num": 256}"#;

/// A fake QMP server on a Unix socket in a tempdir: sends `greeting` (if any, as is), then for
/// each command it reads answers with the next of `replies` (`{id}` is replaced by the
/// command's id; a reply ending in NUL is the last, and the server hangs up after it).
/// Returns the socket path, the tempdir and the thread, which yields the
/// commands it saw.
pub fn qmp_server(
    greeting: Option<&str>,
    replies: Vec<String>,
) -> (
    PathBuf,
    tempfile::TempDir,
    std::thread::JoinHandle<Vec<Value>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qmp.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let greeting = greeting.map(str::to_string);
    let t = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut seen = Vec::new();
        if let Some(g) = greeting {
            s.write_all(g.as_bytes()).unwrap();
        }
        let mut r = BufReader::new(s.try_clone().unwrap());
        for reply in replies {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap() == 0 {
                break;
            }
            let cmd: Value = serde_json::from_str(&line).unwrap();
            let id = cmd["id"].to_string();
            seen.push(cmd);
            // A reply ending in NUL: write the rest and hang up.
            let (text, hang_up) = match reply.strip_suffix('\0') {
                Some(t) => (t, true),
                None => (reply.as_str(), false),
            };
            if s.write_all(text.replace("{id}", &id).as_bytes()).is_err() || hang_up {
                return seen;
            }
        }
        // Hold the connection until the client hangs up.
        let mut rest = Vec::new();
        let _ = r.read_to_end(&mut rest);
        seen
    });
    (path, dir, t)
}

pub fn greeting() -> String {
    format!("{GREETING}\r\n")
}

pub fn ret(v: &str) -> String {
    format!("{{\"return\": {v}, \"id\": {{id}}}}\r\n")
}
