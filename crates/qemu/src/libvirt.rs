//! VMs that libvirt manages, asked of libvirt itself through `virsh`, its own client. The agent
//! is one static binary and links no libvirt; `virsh` is installed with libvirt
//! (`libvirt-clients`) and speaks to the daemon for us.
//!
//! A [`Virsh`] is one `virsh -q -c URI` process kept for the agent's life, fed commands on its
//! stdin: a `virsh` started per question costs ~20 ms of CPU (measured here, libvirt 9.0), a
//! command in the session ~6 ms of wall time, most of it libvirtd's. After each command the
//! session sends `echo` with a marker whose output differs from the echoed command line, and
//! reads stdout and stderr (one pipe) up to that marker: what came before is the command's
//! output, `error: ` lines its errors, and `virsh # …` lines the prompt echoing commands (virsh
//! does that when its stdin is no terminal). Every exchange is bounded by a timeout; a virsh
//! that times out or ends is killed, and the next command starts another.
//!
//! What it asks: the running domains (`list --name`), a domain's taps (`domiflist`: the
//! `Interface` column, the tap libvirt made or was given), and QMP commands through libvirt
//! (`qemu-monitor-command DOMAIN --cmd JSON`), which is how QMP reaches a domain whose monitor
//! socket libvirt holds: never by opening that socket.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::qmp::{answer, Monitor, QemuVersion, QmpError, QmpErrorKind};

/// What went wrong asking libvirt, with the connection (URI) it went wrong on.
#[derive(Debug, thiserror::Error)]
#[error("libvirt {uri}: {kind}")]
pub struct VirshError {
    pub uri: String,
    pub kind: VirshErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum VirshErrorKind {
    /// virsh could not be started.
    #[error("cannot run {}: {error}", program.display())]
    Spawn {
        program: PathBuf,
        error: std::io::Error,
    },
    /// The pipe for virsh's output, or the thread reading it, could not be made.
    #[error("a pipe for virsh: {0}")]
    Pipe(std::io::Error),
    /// An argument holds a line break, which would end the command early.
    #[error("{0:?}: a line break cannot be sent to virsh")]
    LineBreak(String),
    /// The command could not be written to virsh.
    #[error("virsh: {0}")]
    Send(std::io::Error),
    /// No end of `command`'s output within `after` (the session is killed).
    #[error("virsh {command}: no answer in {after:?} (libvirtd busy or stuck?)")]
    Timeout { command: String, after: Duration },
    /// virsh ended while we waited; the `error:` lines it printed.
    #[error("virsh ended: {}", said.join("; "))]
    Ended { said: Vec<String> },
    /// The command failed: virsh's `error:` lines.
    #[error("{}", .0.join("; "))]
    Failed(Vec<String>),
    /// `qemu-monitor-command` printed something that is not a JSON reply.
    #[error("qemu-monitor-command {domain}: not JSON ({why}): {out:?}")]
    NotJson {
        domain: String,
        why: String,
        out: String,
    },
}

impl VirshError {
    /// Whether virsh said `text` in one of its `error:` lines (the command ran, libvirt refused).
    pub fn said(&self, text: &str) -> bool {
        matches!(&self.kind, VirshErrorKind::Failed(lines) if lines.iter().any(|l| l.contains(text)))
    }
}

/// A session shared by whoever asks libvirt (discovery, each VM's monitor).
pub type SharedVirsh = std::sync::Arc<std::sync::Mutex<Virsh>>;

/// One `virsh` session on one libvirt connection, started again when it died.
pub struct Virsh {
    program: PathBuf,
    uri: String,
    timeout: Duration,
    session: Option<Session>,
    markers: u64,
}

/// A running virsh: its stdin, and the chunks of its stdout and stderr.
struct Session {
    child: Child,
    stdin: ChildStdin,
    out: Receiver<Vec<u8>>,
    pending: Vec<u8>,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl std::fmt::Debug for Virsh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Virsh").field("uri", &self.uri).finish()
    }
}

impl Virsh {
    /// Starts `program` (`virsh`) on `uri` and checks the connection (`uri`); every later
    /// command must finish within `timeout`.
    pub fn start(program: &Path, uri: &str, timeout: Duration) -> Result<Virsh, VirshError> {
        let mut v = Virsh {
            program: program.to_path_buf(),
            uri: uri.to_string(),
            timeout,
            session: None,
            markers: 0,
        };
        v.run(&["uri"])?;
        Ok(v)
    }

    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Whether a virsh runs now (false after a timeout or its end, until the next command).
    pub fn alive(&self) -> bool {
        self.session.is_some()
    }

    fn err(&self, kind: VirshErrorKind) -> VirshError {
        VirshError {
            uri: self.uri.clone(),
            kind,
        }
    }

    fn spawn(&self) -> Result<Session, VirshError> {
        let program = &self.program;
        let pipe = |e| self.err(VirshErrorKind::Pipe(e));
        let (reader, writer) = std::io::pipe().map_err(pipe)?;
        let writer2 = writer.try_clone().map_err(pipe)?;
        let mut child = Command::new(program)
            .args(["-q", "-c", &self.uri])
            .stdin(Stdio::piped())
            .stdout(writer)
            .stderr(writer2)
            .env("LC_ALL", "C")
            .spawn()
            .map_err(|error| {
                self.err(VirshErrorKind::Spawn {
                    program: program.clone(),
                    error,
                })
            })?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let (tx, out) = std::sync::mpsc::channel();
        // The one reader of the pipe. It ends when virsh does (its end of the pipe closes).
        let reading = std::thread::Builder::new()
            .name("virsh-out".into())
            .spawn(move || {
                let mut reader = reader;
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = reader.read(&mut buf) {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            });
        let session = Session {
            child,
            stdin,
            out,
            pending: Vec::new(),
        };
        reading.map_err(pipe)?; // (the session's drop kills the virsh)
        Ok(session)
    }

    /// Runs one virsh command; its output, or its `error:` lines.
    pub fn run(&mut self, args: &[&str]) -> Result<String, VirshError> {
        let mut line = String::new();
        for a in args {
            if a.contains(['\n', '\r', '\0']) {
                return Err(self.err(VirshErrorKind::LineBreak(a.to_string())));
            }
            line.push('\'');
            line.push_str(&a.replace('\'', r"'\''"));
            line.push_str("' ");
        }
        self.markers += 1;
        // echo joins its arguments with a space: the output never equals the command's echo.
        let (a, b) = ("@@colosched", format!("{}@@", self.markers));
        let marker = format!("{a} {b}");
        let sent = format!("{line}\necho '{a}' '{b}'\n");
        if self.session.is_none() {
            self.session = Some(self.spawn()?);
        }
        let s = self.session.as_mut().expect("just made");
        if let Err(e) = s.stdin.write_all(sent.as_bytes()) {
            self.session = None;
            return Err(self.err(VirshErrorKind::Send(e)));
        }
        let deadline = Instant::now() + self.timeout;
        let text = loop {
            let seen = String::from_utf8_lossy(&s.pending).into_owned();
            if let Some(at) = seen.find(&marker) {
                s.pending = seen.as_bytes()[at + marker.len()..].to_vec();
                break seen[..at].to_string();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match s.out.recv_timeout(left) {
                Ok(chunk) => s.pending.extend_from_slice(&chunk),
                Err(RecvTimeoutError::Timeout) => {
                    self.session = None;
                    return Err(self.err(VirshErrorKind::Timeout {
                        command: args.join(" "),
                        after: self.timeout,
                    }));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.session = None;
                    let said = output_and_errors(&seen).1;
                    return Err(self.err(VirshErrorKind::Ended { said }));
                }
            }
        };
        let (output, errors) = output_and_errors(&text);
        if errors.is_empty() {
            Ok(output)
        } else {
            Err(self.err(VirshErrorKind::Failed(errors)))
        }
    }

    /// The names of the running domains.
    pub fn domains(&mut self) -> Result<Vec<String>, VirshError> {
        let out = self.run(&["list", "--name"])?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// The domain's interfaces' host-side device names (`domiflist`'s `Interface`; `-` when
    /// it has none, as a `user` network: left out).
    pub fn taps(&mut self, domain: &str) -> Result<Vec<String>, VirshError> {
        let out = self.run(&["domiflist", domain])?;
        Ok(parse_domiflist(&out))
    }

    /// One QMP command through libvirt; the whole reply (`return` or `error`).
    pub fn monitor(&mut self, domain: &str, command: &Value) -> Result<Value, VirshError> {
        let out = self.run(&[
            "qemu-monitor-command",
            domain,
            "--cmd",
            &command.to_string(),
        ])?;
        serde_json::from_str(out.trim()).map_err(|e| {
            self.err(VirshErrorKind::NotJson {
                domain: domain.to_string(),
                why: e.to_string(),
                out,
            })
        })
    }
}

/// A domain's QEMU monitor reached through libvirt (`qemu-monitor-command`): what a QMP socket
/// of our own gives, for a domain whose monitor libvirt holds.
pub struct DomainMonitor {
    virsh: SharedVirsh,
    domain: String,
    version: QemuVersion,
}

impl DomainMonitor {
    /// Asks the domain's QEMU version (`query-version`): fails when libvirt has no such running
    /// domain or cannot reach its monitor.
    pub fn new(virsh: SharedVirsh, domain: &str) -> Result<DomainMonitor, QmpError> {
        let mut m = DomainMonitor {
            virsh,
            domain: domain.to_string(),
            version: QemuVersion::default(),
        };
        let v = m.execute("query-version", None)?;
        m.version = serde_json::from_value(v["qemu"].clone()).map_err(|e| QmpError {
            peer: m.peer(),
            kind: QmpErrorKind::BadReply {
                command: "query-version".into(),
                why: e.to_string(),
            },
        })?;
        Ok(m)
    }
}

impl Monitor for DomainMonitor {
    fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value, QmpError> {
        let mut msg = serde_json::json!({ "execute": command });
        if let Some(a) = arguments {
            msg["arguments"] = a;
        }
        let reply = self
            .virsh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .monitor(&self.domain, &msg);
        let reply = reply.map_err(|e| QmpError {
            peer: self.peer(),
            kind: QmpErrorKind::Transport(Box::new(e)),
        })?;
        answer(&self.peer(), command, reply)
    }
    fn version(&self) -> QemuVersion {
        self.version
    }
    fn peer(&self) -> String {
        format!("QMP of libvirt domain {}", self.domain)
    }
}

/// A command's text split into its output (prompt echoes removed) and its `error:` lines.
fn output_and_errors(text: &str) -> (String, Vec<String>) {
    let (mut output, mut errors) = (String::new(), Vec::new());
    for line in text.split_inclusive('\n') {
        // Output that ends without a newline runs into the next prompt: keep what precedes it.
        let line = line.split("virsh # ").next().unwrap_or("");
        if let Some(e) = line.strip_prefix("error: ") {
            errors.push(e.trim_end().to_string());
        } else {
            output.push_str(line);
        }
    }
    (output, errors)
}

/// The `Interface` column of `virsh -q domiflist` (no header with -q; with one, it is skipped).
pub fn parse_domiflist(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "-" && *name != "Interface" && !name.starts_with("---"))
        .map(String::from)
        .collect()
}

/// Where virsh is: `program` as given when it has a slash, else found on PATH.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).is_file().then(|| PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for virsh: a shell that answers the commands the session sends as virsh does
    /// when its stdin is no terminal (prompt and command echoed, `echo` output without a
    /// newline, errors on stderr). libvirt itself is tested for real in tests/test_host_libvirt.py.
    const FAKE: &str = r#"#!/bin/sh
while IFS= read -r line; do
  printf 'virsh # %s\n' "$line"
  eval "set -- $line"
  case "$1" in
    uri) echo "test:///fake" ;;
    echo) shift; printf '%s' "$*" ;;
    list) printf 'web\ndb one\n' ;;
    domiflist) printf ' vnet0      bridge     br0      virtio   52:54:00:00:00:01\n -          user       -        e1000    52:54:00:00:00:02\n' ;;
    qemu-monitor-command) printf '{"return":{"status":"running"},"id":"libvirt-7"}\n\n' ;;
    hang) sleep 5 ;;
    quit) exit 0 ;;
    *) echo "error: unknown command: '$1'" >&2 ;;
  esac
done
"#;

    fn fake(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join("virsh");
        std::fs::write(&p, FAKE).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn a_session_asks_domains_taps_and_qmp_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let mut v =
            Virsh::start(&fake(dir.path()), "test:///fake", Duration::from_secs(5)).unwrap();
        assert_eq!(v.domains().unwrap(), ["web", "db one"]);
        assert_eq!(v.taps("web").unwrap(), ["vnet0"]);
        let r = v
            .monitor("it's", &serde_json::json!({"execute": "query-status"}))
            .unwrap();
        assert_eq!(r["return"]["status"], "running");
        let e = v.run(&["nosuch"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "libvirt test:///fake: unknown command: 'nosuch'"
        );
        assert!(e.said("unknown command") && !e.said("failed to get domain"));
        assert!(v.alive());
        let e = v.run(&["a\nb"]).unwrap_err();
        assert!(matches!(e.kind, VirshErrorKind::LineBreak(_)), "{e}");
        assert!(e.to_string().contains("line break"));
        assert_eq!(v.run(&["echo", "x y"]).unwrap(), "x y");
    }

    #[test]
    fn a_hung_or_ended_virsh_is_an_error_and_the_session_dead() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = Virsh::start(&fake(dir.path()), "t", Duration::from_millis(300)).unwrap();
        let e = v.run(&["hang"]).unwrap_err().to_string();
        assert!(
            e.starts_with("libvirt t: virsh hang: no answer in 300ms"),
            "{e}"
        );
        assert!(!v.alive());
        // The next command starts another virsh.
        assert_eq!(v.domains().unwrap(), ["web", "db one"]);
        let e = v.run(&["quit"]).unwrap_err();
        assert!(matches!(e.kind, VirshErrorKind::Ended { .. }), "{e}");
        assert!(!v.alive());
        assert_eq!(v.run(&["uri"]).unwrap().trim(), "test:///fake");
        let e = Virsh::start(Path::new("/nonexistent/virsh"), "t", Duration::from_secs(1));
        let e = e.unwrap_err();
        assert!(matches!(e.kind, VirshErrorKind::Spawn { .. }), "{e}");
        assert!(e
            .to_string()
            .starts_with("libvirt t: cannot run /nonexistent/virsh"));
    }

    #[test]
    fn domiflist_with_and_without_its_header() {
        let with = "Interface   Type       Source   Model    MAC\n\
                    -------------------------------------------------------------\n \
                    hgtap0      ethernet   -        virtio   52:54:00:77:00:00\n";
        assert_eq!(parse_domiflist(with), ["hgtap0"]);
        assert_eq!(parse_domiflist(""), Vec::<String>::new());
    }
}
