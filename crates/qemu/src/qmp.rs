//! A minimal QMP client: one Unix socket, blocking, every exchange bounded by a timeout.
//!
//! It reads the greeting, enters command mode (`qmp_capabilities`), and asks what the host
//! agent needs: `query-cpus-fast` (vCPU index → host thread, which works when QEMU does not
//! name its threads), `query-status`, and QEMU ≥ 7.2's virtio introspection
//! (`x-query-virtio`, `x-query-virtio-queue-status`: a virtio-net RX queue's indices, from
//! which the host crate's `decide::tap::virtio_rx_fill` estimates the ring fill). The
//! executor of `colosched-vms` drives migrations through `execute`.
//!
//! Checked against this machine's QEMU 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18): 216 commands,
//! among them `query-cpus-fast`, `query-status`, `x-query-virtio`, `x-query-virtio-status`,
//! `x-query-virtio-queue-status`, `x-query-virtio-vhost-queue-status` and
//! `x-query-virtio-queue-element`. The `x-` commands are unstable by QEMU's rules: a missing
//! one is a `CommandNotFound` error reply, which callers should treat as "not available".
//!
//! Cost, measured against a stopped QEMU 7.2 here (`host_sense_cost` example): a
//! `query-status` round trip takes about 0.2 ms, an `x-query-virtio-queue-status` about 0.5 ms,
//! almost all of it QEMU's CPU in its main loop. Not something to ask every VM every 10 ms.
//!
//! QEMU serves one client per monitor socket at a time: while another client holds it, the
//! connection is accepted by the kernel but no greeting comes, which reads as a timeout.
//! Events that arrive between replies are skipped.
//!
//! Every error names the socket and what went wrong (see [`QmpError`]).

use std::fmt;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

/// What went wrong, with the monitor it went wrong on.
#[derive(Debug, thiserror::Error)]
#[error("{peer}: {kind}")]
pub struct QmpError {
    /// `QMP socket PATH`, or `QMP of libvirt domain NAME`.
    pub peer: String,
    pub kind: QmpErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum QmpErrorKind {
    /// The socket could not be connected to (missing, not a socket, nobody listening).
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// Nothing (complete) came within the timeout while waiting for `what`.
    #[error(
        "timed out after {after:?} waiting for {what} (another client may hold the socket, \
         or it is not QMP)"
    )]
    Timeout { what: String, after: Duration },
    /// The peer closed the connection while we waited for `what`.
    #[error("closed while waiting for {what}")]
    Closed { what: String },
    /// The first line was not a QMP greeting: not a QMP socket (an HMP monitor, something
    /// else). Holds the start of what came.
    #[error("not a QMP socket: it began with {0:?}")]
    NotQmp(String),
    #[error("{0}")]
    Io(std::io::Error),
    /// QEMU answered `command` with an error.
    #[error("{command} failed: {class}: {desc}")]
    Reply {
        command: String,
        class: String,
        desc: String,
    },
    /// QEMU's answer to `command` was not what the command returns.
    #[error("unexpected reply to {command}: {why}")]
    BadReply { command: String, why: String },
    /// What carries the commands to QEMU (libvirt's virsh, for `libvirt::DomainMonitor`)
    /// could not pass this one on.
    #[error("{0}")]
    Transport(Box<dyn std::error::Error + Send + Sync>),
}

impl QmpError {
    /// Whether QEMU does not know the command (an `x-` command of another version).
    pub fn is_command_not_found(&self) -> bool {
        matches!(&self.kind, QmpErrorKind::Reply { class, .. } if class == "CommandNotFound")
    }
}

pub type Result<T> = std::result::Result<T, QmpError>;

/// The QEMU version in the greeting.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct QemuVersion {
    pub major: u32,
    pub minor: u32,
    pub micro: u32,
}

/// One vCPU of `query-cpus-fast`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct CpuInfo {
    pub cpu_index: u32,
    /// The host thread that runs it.
    pub thread_id: i32,
    pub qom_path: String,
}

/// `query-status`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct VmStatus {
    /// `running`, `paused`, `prelaunch`, `inmigrate`, …
    pub status: String,
    pub running: bool,
}

/// One device of `x-query-virtio`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct VirtioDevice {
    /// QOM path of the virtio backend, as `x-query-virtio-queue-status` takes it.
    pub path: String,
    /// `virtio-net`, `virtio-blk`, …
    pub name: String,
}

/// The fields of `x-query-virtio-queue-status` the fill estimate needs (QEMU 7.2 names).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct VirtQueueStatus {
    pub name: String,
    pub queue_index: u16,
    /// Slots in the ring.
    pub vring_num: u32,
    /// Guest address of the descriptor table; 0 until the guest's driver sets the queue up.
    pub vring_desc: u64,
    /// Buffers QEMU has taken from the guest (wraps at 2^16). Absent for vhost queues.
    #[serde(default)]
    pub last_avail_idx: Option<u16>,
    /// QEMU's copy of the guest's count of buffers posted (wraps at 2^16).
    #[serde(default)]
    pub shadow_avail_idx: Option<u16>,
    pub used_idx: u16,
    /// Buffers QEMU took and has not given back yet.
    pub inuse: u32,
}

/// A connected QMP session in command mode.
pub struct Qmp {
    path: PathBuf,
    stream: UnixStream,
    timeout: Duration,
    /// Bytes read past the last line returned.
    pending: Vec<u8>,
    version: QemuVersion,
    next_id: u64,
}

impl fmt::Debug for Qmp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qmp")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

impl Qmp {
    /// Connects, reads the greeting and enters command mode; each step (and each later
    /// command) must finish within `timeout`.
    pub fn connect(path: impl AsRef<Path>, timeout: Duration) -> Result<Qmp> {
        let path = path.as_ref().to_path_buf();
        let stream = connect_unix(&path, timeout).map_err(|e| QmpError {
            peer: socket_peer(&path),
            kind: e,
        })?;
        let mut q = Qmp {
            path,
            stream,
            timeout,
            pending: Vec::new(),
            version: QemuVersion::default(),
            next_id: 0,
        };
        let deadline = Instant::now() + timeout;
        let line = match q.read_line("the QMP greeting", deadline) {
            // Something came, but no line of it: not QMP, which greets with a line at once.
            Err(QmpError {
                kind: QmpErrorKind::Timeout { .. },
                ..
            }) if !q.pending.is_empty() => q.pending.clone(),
            r => r?,
        };
        let greeting: Option<QemuVersion> =
            serde_json::from_slice::<Value>(&line).ok().and_then(|v| {
                serde_json::from_value(v.get("QMP")?.get("version")?.get("qemu")?.clone()).ok()
            });
        q.version = greeting.ok_or_else(|| {
            let start = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
            q.err(QmpErrorKind::NotQmp(start))
        })?;
        q.execute("qmp_capabilities", None)?;
        Ok(q)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn version(&self) -> QemuVersion {
        self.version
    }

    /// The pid of the process that listens on the socket (SO_PEERCRED): the QEMU itself, unless
    /// it created the socket before a `-daemonize` fork (then the parent, already gone).
    pub fn peer_pid(&self) -> Result<i32> {
        let cred = rustix::net::sockopt::socket_peercred(&self.stream)
            .map_err(|e| self.err(QmpErrorKind::Io(e.into())))?;
        Ok(cred.pid.as_raw_nonzero().get())
    }

    /// Runs `command` and returns its `return` value.
    pub fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = serde_json::json!({ "execute": command, "id": id });
        if let Some(a) = arguments {
            msg["arguments"] = a;
        }
        let mut bytes = serde_json::to_vec(&msg).expect("a JSON value serializes");
        bytes.push(b'\n');
        let deadline = Instant::now() + self.timeout;
        self.stream
            .set_write_timeout(Some(self.timeout))
            .map_err(|e| self.err(QmpErrorKind::Io(e)))?;
        self.stream.write_all(&bytes).map_err(|e| {
            let kind = if is_timeout(&e) {
                QmpErrorKind::Timeout {
                    what: format!("room to send {command}"),
                    after: self.timeout,
                }
            } else {
                QmpErrorKind::Io(e)
            };
            self.err(kind)
        })?;
        let what = format!("the reply to {command}");
        loop {
            let line = self.read_line(&what, deadline)?;
            let bad = |why: String| QmpErrorKind::BadReply {
                command: command.to_string(),
                why,
            };
            let v: Value = serde_json::from_slice(&line).map_err(|e| {
                let start = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
                self.err(bad(format!("not JSON ({e}): {start:?}")))
            })?;
            if v.get("event").is_some() || v.get("id").and_then(Value::as_u64) != Some(id) {
                continue; // an event, or a reply to a command we gave up on
            }
            return answer(&socket_peer(&self.path), command, v);
        }
    }

    fn err(&self, kind: QmpErrorKind) -> QmpError {
        QmpError {
            peer: socket_peer(&self.path),
            kind,
        }
    }

    /// The next line (without its end), waiting at most until `deadline`.
    fn read_line(&mut self, what: &str, deadline: Instant) -> Result<Vec<u8>> {
        loop {
            if let Some(n) = self.pending.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=n).collect();
                while line.last().is_some_and(|b| b.is_ascii_whitespace()) {
                    line.pop();
                }
                if line.is_empty() {
                    continue;
                }
                return Ok(line);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let timeout = || QmpErrorKind::Timeout {
                what: what.to_string(),
                after: self.timeout,
            };
            if left.is_zero() {
                return Err(self.err(timeout()));
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(|e| self.err(QmpErrorKind::Io(e)))?;
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return Err(self.err(QmpErrorKind::Closed {
                        what: what.to_string(),
                    }))
                }
                Ok(n) if self.pending.len() + n > MAX_LINE => {
                    let e = std::io::Error::other(format!(
                        "a line of more than {MAX_LINE} bytes while waiting for {what}"
                    ));
                    return Err(self.err(QmpErrorKind::Io(e)));
                }
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if is_timeout(&e) => return Err(self.err(timeout())),
                Err(e) => return Err(self.err(QmpErrorKind::Io(e))),
            }
        }
    }
}

impl Monitor for Qmp {
    fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value> {
        Qmp::execute(self, command, arguments)
    }
    fn version(&self) -> QemuVersion {
        self.version
    }
    fn peer(&self) -> String {
        socket_peer(&self.path)
    }
}

/// A QEMU monitor: a QMP socket of our own ([`Qmp`]), or libvirt's, reached through libvirt
/// ([`crate::libvirt::DomainMonitor`]). What the agents ask is written once, here.
pub trait Monitor: Send {
    /// Runs `command` and returns its `return` value.
    fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value>;
    fn version(&self) -> QemuVersion;
    /// What errors name: `QMP socket PATH`, `QMP of libvirt domain NAME`.
    fn peer(&self) -> String;

    /// The names of the commands this QEMU knows.
    fn query_commands(&mut self) -> Result<Vec<String>> {
        #[derive(Deserialize)]
        struct Cmd {
            name: String,
        }
        let cmds: Vec<Cmd> = call(self, "query-commands", None)?;
        Ok(cmds.into_iter().map(|c| c.name).collect())
    }

    /// Every vCPU with its host thread, by index.
    fn query_cpus_fast(&mut self) -> Result<Vec<CpuInfo>> {
        let mut cpus: Vec<CpuInfo> = call(self, "query-cpus-fast", None)?;
        cpus.sort_by_key(|c| c.cpu_index);
        Ok(cpus)
    }

    fn query_status(&mut self) -> Result<VmStatus> {
        call(self, "query-status", None)
    }

    /// The virtio devices (QEMU ≥ 7.2; `CommandNotFound` before).
    fn query_virtio(&mut self) -> Result<Vec<VirtioDevice>> {
        call(self, "x-query-virtio", None)
    }

    /// One queue of a virtio device (`path` from [`Monitor::query_virtio`]); for virtio-net,
    /// queue 0 is the first RX queue and 1 the first TX queue.
    fn virtio_queue_status(&mut self, path: &str, queue: u16) -> Result<VirtQueueStatus> {
        let args = serde_json::json!({ "path": path, "queue": queue });
        call(self, "x-query-virtio-queue-status", Some(args))
    }
}

/// `execute`, with the reply read as a `T`.
pub fn call<T: serde::de::DeserializeOwned, M: Monitor + ?Sized>(
    m: &mut M,
    command: &str,
    arguments: Option<Value>,
) -> Result<T> {
    let v = m.execute(command, arguments)?;
    serde_json::from_value(v).map_err(|e| QmpError {
        peer: m.peer(),
        kind: QmpErrorKind::BadReply {
            command: command.to_string(),
            why: e.to_string(),
        },
    })
}

/// A QMP reply (the one to `command`, id checked by the caller) as its `return` value or error.
pub fn answer(peer: &str, command: &str, v: Value) -> Result<Value> {
    let kind = if let Some(r) = v.get("return") {
        return Ok(r.clone());
    } else if let Some(e) = v.get("error") {
        let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        QmpErrorKind::Reply {
            command: command.to_string(),
            class: s("class"),
            desc: s("desc"),
        }
    } else {
        QmpErrorKind::BadReply {
            command: command.to_string(),
            why: format!("neither return nor error: {v}"),
        }
    };
    Err(QmpError {
        peer: peer.to_string(),
        kind,
    })
}

fn socket_peer(path: &Path) -> String {
    format!("QMP socket {}", path.display())
}

/// The longest reply line accepted (`query-qmp-schema`, the longest QEMU has, is ~200 KiB).
const MAX_LINE: usize = 16 << 20;

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// Connects without blocking past `timeout`: a Unix socket whose listener's backlog is full
/// (a monitor busy with another client) makes a blocking connect wait for ever, so connect
/// non-blocking and retry while it says "try again".
fn connect_unix(path: &Path, timeout: Duration) -> std::result::Result<UnixStream, QmpErrorKind> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let connect = |e: rustix::io::Errno| QmpErrorKind::Connect(e.into());
    let addr = SocketAddrUnix::new(path).map_err(connect)?;
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .map_err(connect)?;
    let deadline = Instant::now() + timeout;
    loop {
        match rustix::net::connect(&fd, &addr) {
            Ok(()) => break,
            Err(rustix::io::Errno::AGAIN) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(rustix::io::Errno::AGAIN) => {
                return Err(QmpErrorKind::Timeout {
                    what: "a connection".into(),
                    after: timeout,
                })
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(connect(e)),
        }
    }
    rustix::io::ioctl_fionbio(&fd, false).map_err(|e| QmpErrorKind::Io(e.into()))?;
    Ok(UnixStream::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::read_vm;
    use crate::testing::{greeting, qmp_server as server, ret, Qemu, QemuOpts, QUEUE};

    // Replies recorded from QEMU 7.2.22 (this machine's), `-machine q35,accel=tcg -S -smp 2`
    // with a virtio-net-pci device (more in `testing`).
    const CPUS: &str = r#"[{"thread-id": 29232, "props": {"core-id": 1, "thread-id": 0, "socket-id": 0}, "qom-path": "/machine/unattached/device[2]", "cpu-index": 1, "target": "x86_64"}, {"thread-id": 29231, "props": {"core-id": 0, "thread-id": 0, "socket-id": 0}, "qom-path": "/machine/unattached/device[0]", "cpu-index": 0, "target": "x86_64"}]"#;
    const STATUS: &str = r#"{"status": "prelaunch", "singlestep": false, "running": false}"#;
    const VIRTIO: &str =
        r#"[{"name": "virtio-net", "path": "/machine/peripheral/nic0/virtio-backend"}]"#;
    const EVENT: &str = r#"{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "RESUME"}"#;

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn a_session_against_recorded_replies() {
        let replies = vec![
            ret("{}"),
            // An event before the reply, and the reply split over two writes' worth of text.
            format!("{EVENT}\r\n{}", ret(CPUS)),
            ret(STATUS),
            ret(VIRTIO),
            ret(QUEUE),
            ret(r#"[{"name": "query-status"}, {"name": "x-query-virtio"}]"#),
        ];
        let (path, _dir, t) = server(Some(&greeting()), replies);
        let mut q = Qmp::connect(&path, T).unwrap();
        assert_eq!(
            q.version(),
            QemuVersion {
                major: 7,
                minor: 2,
                micro: 22
            }
        );
        let cpus = q.query_cpus_fast().unwrap();
        assert_eq!(
            cpus.iter()
                .map(|c| (c.cpu_index, c.thread_id))
                .collect::<Vec<_>>(),
            vec![(0, 29231), (1, 29232)],
            "by index"
        );
        let st = q.query_status().unwrap();
        assert_eq!((st.status.as_str(), st.running), ("prelaunch", false));
        let dev = q.query_virtio().unwrap();
        assert_eq!(dev[0].name, "virtio-net");
        let qs = q.virtio_queue_status(&dev[0].path, 0).unwrap();
        assert_eq!((qs.vring_num, qs.vring_desc, qs.queue_index), (256, 0, 0));
        assert_eq!((qs.last_avail_idx, qs.shadow_avail_idx), (Some(0), Some(0)));
        assert_eq!(
            q.query_commands().unwrap(),
            vec!["query-status".to_string(), "x-query-virtio".to_string()]
        );
        drop(q);
        let seen = t.join().unwrap();
        let names: Vec<&str> = seen
            .iter()
            .map(|c| c["execute"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "qmp_capabilities",
                "query-cpus-fast",
                "query-status",
                "x-query-virtio",
                "x-query-virtio-queue-status",
                "query-commands"
            ]
        );
        assert_eq!(
            seen[4]["arguments"],
            serde_json::json!({"path": "/machine/peripheral/nic0/virtio-backend", "queue": 0})
        );
    }

    #[test]
    fn error_replies_name_the_socket_and_the_command() {
        let replies = vec![
            ret("{}"),
            "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command x-query-virtio has not been found\"}, \"id\": {id}}\r\n".into(),
            "{\"error\": {\"class\": \"GenericError\", \"desc\": \"Path /nope is not a VirtIODevice\"}, \"id\": {id}}\r\n".into(),
            ret(r#"{"status": 5}"#),
            "this is not json\r\n".into(),
        ];
        let (path, _dir, t) = server(Some(&greeting()), replies);
        let mut q = Qmp::connect(&path, T).unwrap();
        let e = q.query_virtio().unwrap_err();
        assert!(e.is_command_not_found());
        let e = q.virtio_queue_status("/nope", 0).unwrap_err();
        assert!(!e.is_command_not_found());
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("QMP socket {}: ", path.display()))
                && msg.contains("x-query-virtio-queue-status failed: GenericError: Path /nope"),
            "{msg}"
        );
        let e = q.query_status().unwrap_err().to_string();
        assert!(e.contains("unexpected reply to query-status"), "{e}");
        let e = q.query_status().unwrap_err().to_string();
        assert!(
            e.contains("not JSON") && e.contains("this is not json"),
            "{e}"
        );
        drop(q);
        t.join().unwrap();
    }

    #[test]
    fn not_a_qmp_socket_silence_and_hang_ups() {
        // Something else speaks first.
        let (path, _d1, t1) = server(Some("SSH-2.0-OpenSSH_9.2\r\n"), vec![]);
        let e = Qmp::connect(&path, T).unwrap_err();
        assert!(matches!(e.kind, QmpErrorKind::NotQmp(_)), "{e}");
        assert!(
            e.to_string()
                .contains("not a QMP socket: it began with \"SSH-2.0"),
            "{e}"
        );
        drop(e);
        t1.join().unwrap();
        // Something speaks, but never a line.
        let (path, _d0, t0) = server(Some("\u{1b}[?1h partial"), vec![]);
        let e = Qmp::connect(&path, Duration::from_millis(200)).unwrap_err();
        assert!(e.to_string().contains("not a QMP socket"), "{e}");
        drop(e);
        t0.join().unwrap();
        // Nothing speaks: the greeting times out (QEMU with another client looks the same).
        let (path, _d2, t2) = server(None, vec![]);
        let short = Duration::from_millis(200);
        let started = Instant::now();
        let e = Qmp::connect(&path, short).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert!(matches!(e.kind, QmpErrorKind::Timeout { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("timed out after 200ms waiting for the QMP greeting"),
            "{e}"
        );
        t2.join().unwrap();
        // A server that hangs up in the middle of the capabilities exchange.
        let (path, _d3, t3) = server(Some(&greeting()), vec!["{\"ret\0".into()]);
        let e = Qmp::connect(&path, T);
        t3.join().unwrap();
        let e = e.unwrap_err();
        assert!(matches!(e.kind, QmpErrorKind::Closed { .. }), "{e}");
        assert!(e
            .to_string()
            .contains("closed while waiting for the reply to qmp_capabilities"));
        // No socket there, and a regular file.
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.sock");
        let e = Qmp::connect(&missing, T).unwrap_err();
        assert!(matches!(e.kind, QmpErrorKind::Connect(_)));
        assert!(e
            .to_string()
            .starts_with(&format!("QMP socket {}: cannot connect", missing.display())));
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            Qmp::connect(&file, T).unwrap_err().kind,
            QmpErrorKind::Connect(_)
        ));
    }

    #[test]
    fn a_real_qemu_answers_and_its_vcpu_threads_match_discovery() {
        let q = Qemu::spawn(&QemuOpts {
            name: "qmp",
            smp: 2,
            tap: Some("cst2"),
        });
        let mut c = Qmp::connect(&q.qmp, T).unwrap();
        assert!(
            c.version()
                >= QemuVersion {
                    major: 7,
                    minor: 2,
                    micro: 0
                },
            "{:?}",
            c.version()
        );
        let cmds = c.query_commands().unwrap();
        for needed in [
            "query-cpus-fast",
            "query-status",
            "x-query-virtio",
            "x-query-virtio-queue-status",
        ] {
            assert!(
                cmds.iter().any(|n| n == needed),
                "{needed} missing from {cmds:?}"
            );
        }
        let vm = read_vm(Path::new("/proc"), q.pid).unwrap();
        let from_names: Vec<(u32, i32)> = vm.vcpus.iter().map(|v| (v.index, v.tid)).collect();
        let from_qmp: Vec<(u32, i32)> = c
            .query_cpus_fast()
            .unwrap()
            .iter()
            .map(|c| (c.cpu_index, c.thread_id))
            .collect();
        assert_eq!(from_qmp, from_names);
        assert_eq!(from_qmp.len(), 2);
        let st = c.query_status().unwrap();
        assert_eq!((st.status.as_str(), st.running), ("prelaunch", false));
        let devs = c.query_virtio().unwrap();
        let net = devs
            .iter()
            .find(|d| d.name == "virtio-net")
            .expect("virtio-net");
        let rx = c.virtio_queue_status(&net.path, 0).unwrap();
        assert_eq!((rx.queue_index, rx.vring_num), (0, 256));
        // The guest never ran its driver: no ring set up yet.
        assert_eq!(rx.vring_desc, 0);
        assert_eq!((rx.last_avail_idx, rx.shadow_avail_idx), (Some(0), Some(0)));
        let e = c.virtio_queue_status(&net.path, 99).unwrap_err();

        assert!(matches!(e.kind, QmpErrorKind::Reply { .. }), "{e}");
        // The human monitor is no QMP: it greets with a banner.
        let e = Qmp::connect(&q.hmp, T).unwrap_err();
        assert!(
            e.to_string()
                .contains("not a QMP socket: it began with \"QEMU 7."),
            "{e}"
        );
        // One client at a time: a second one gets no greeting.
        let e = Qmp::connect(&q.qmp, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e.kind, QmpErrorKind::Timeout { .. }), "{e}");
        // Still usable after that.
        assert!(c.query_status().is_ok());
        assert_eq!(c.peer_pid().unwrap(), q.pid, "SO_PEERCRED names the QEMU");
    }
}
