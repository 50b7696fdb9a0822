//! The destination QEMU's command line, made from the source's (`/proc/PID/cmdline`).
//!
//! Source and destination run on this one machine, so whatever names a machine-wide resource
//! must differ. What is rewritten (everything the destination makes goes into `run_dir`, named
//! `<vm>.<host>.…`):
//! - server unix sockets (`-qmp`/`-qmp-pretty`/`-monitor`/`-serial`/`-parallel`/`-debugcon`
//!   `unix:PATH,server…`, `-chardev socket,path=PATH,server…`): the one the config names as the
//!   VM's QMP socket becomes `<vm>.<host>.qmp`, any other `<vm>.<host>.N.sock` (QEMU would unlink
//!   the source's socket and bind its own in its place);
//! - output files (`-chardev file,path=`, `file:PATH` of the options above, `-D`):
//!   `<vm>.<host>.<file name>` (QEMU would truncate the source's);
//! - `-pidfile` becomes `<vm>.<host>.pid`; `-daemonize` is dropped (the executor detaches the
//!   destination itself and must be its parent to kill and reap it on failure); `-S` is dropped
//!   (the source runs, so the destination must run once the migration ends); `-incoming` and
//!   `-loadvm` are dropped and `-incoming defer` is added.
//!
//! What is refused (the error names the VM and the argument): taps and bridges by name or by
//! file descriptor (`ifname=`, `fd=`, `fds=`, `vhostfd=`, `br=`), user networking with
//! `hostfwd=` and socket networking that listens or binds (the port is taken by the source),
//! `-vnc`/`-spice`/`-gdb`/`-s` servers on a port, TCP server chardevs, host devices passed
//! through (`vfio-pci`), and memory backed by a shared file (`share=on`: both QEMUs would write
//! the same guest RAM). Everything else is passed as is, disks included: two QEMUs on one
//! machine open the same image exactly as two hosts on shared storage do (QEMU's image locks
//! hand the write lock over when the migration completes).
//!
//! QEMU's options take one argument except the flags in `NO_ARG` (QEMU 7.2's
//! `qemu-options.hx` entries without `HAS_ARG`); an unknown option is read as taking one, as
//! QEMU itself would for every option it has.

use std::path::{Path, PathBuf};

/// QEMU 7.2's options without an argument (`-` and `--` prefixes both accepted by QEMU).
const NO_ARG: &[&str] = &[
    "h",
    "help",
    "version",
    "mem-prealloc",
    "audio-help",
    "snapshot",
    "usb",
    "nographic",
    "portrait",
    "full-screen",
    "alt-grab",
    "ctrl-grab",
    "no-quit",
    "win2k-hack",
    "no-fd-bootchk",
    "no-acpi",
    "no-hpet",
    "singlestep",
    "preconfig",
    "s",
    "S",
    "enable-kvm",
    "xen-attach",
    "xen-domid-restrict",
    "no-reboot",
    "no-shutdown",
    "daemonize",
    "only-migratable",
    "nodefaults",
    "no-user-config",
    "nodefconfig",
    "async-teardown",
    "enable-sync-profile",
    "old-param",
    "semihosting",
    "curses",
    "sdl",
];

/// Why the source's command line cannot be run a second time on this machine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgvError {
    /// An argument (option and value) naming something only one QEMU can hold.
    #[error("argument `{argument}` cannot be duplicated on one machine: {why}")]
    Refused { argument: String, why: &'static str },
    /// The config's QMP socket is not one QEMU serves: nothing to talk to.
    #[error(
        "its QMP socket {} is not a server socket on QEMU's command line (-qmp unix:… or \
         -chardev socket,path=…): the destination's cannot be set",
        qmp.display()
    )]
    NoQmp { qmp: PathBuf },
}

/// The destination's command line and the files it will make (removed if it fails).
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    /// The arguments after the program.
    pub args: Vec<String>,
    /// Its QMP socket (the rewrite of the one the config names).
    pub qmp: PathBuf,
    pub pidfile: PathBuf,
    /// Its stdout and stderr.
    pub log: PathBuf,
    /// Every other path it makes: sockets and output files.
    pub made: Vec<PathBuf>,
}

impl Destination {
    /// Every path the destination QEMU (or the executor for it) creates.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut all = vec![self.qmp.clone(), self.pidfile.clone(), self.log.clone()];
        all.extend(self.made.iter().cloned());
        all
    }
}

/// One comma-separated QEMU option string split where the commas are not doubled; each part
/// stays in its escaped form, to be written back.
fn split_opts(s: &str) -> Vec<String> {
    colosched_qemu::opts::split_opts(s, false)
}

/// The value of `key=` among `parts` (commas unescaped); `Some("on")` for a bare `key`.
fn opt(parts: &[String], key: &str) -> Option<String> {
    parts.iter().find_map(|p| match p.split_once('=') {
        Some((k, v)) if k == key => Some(v.replace(",,", ",")),
        None if p == key => Some("on".into()),
        _ => None,
    })
}

fn is_on(v: Option<String>) -> bool {
    matches!(v.as_deref(), Some("on" | "yes" | "true" | "y"))
}

struct Rewriter<'a> {
    run_dir: &'a Path,
    stem: String,
    /// The source's QMP socket as the config names it, and the source's working directory.
    src_qmp: &'a Path,
    cwd: &'a Path,
    qmp: Option<PathBuf>,
    made: Vec<PathBuf>,
}

impl Rewriter<'_> {
    fn refuse(option: &str, arg: &str, why: &'static str) -> ArgvError {
        ArgvError::Refused {
            argument: format!("{option} {arg}").trim().to_string(),
            why,
        }
    }

    /// The destination's path for a server socket of the source at `path`.
    fn socket(&mut self, path: &str) -> PathBuf {
        let p = self.cwd.join(path);
        if self.qmp.is_none() && (p == self.cwd.join(self.src_qmp)) {
            let q = self.run_dir.join(format!("{}.qmp", self.stem));
            self.qmp = Some(q.clone());
            return q;
        }
        let n = self.made.len();
        let q = self.run_dir.join(format!("{}.{n}.sock", self.stem));
        self.made.push(q.clone());
        q
    }

    /// The destination's path for an output file of the source at `path`: its file name in
    /// run_dir, without the `<vm>.<host>.` of an earlier move made by this executor.
    fn file(&mut self, path: &str) -> PathBuf {
        let p = self.cwd.join(path);
        let mut name = p
            .file_name()
            .map_or("out".into(), |n| n.to_string_lossy().into_owned());
        if p.parent() == Some(self.run_dir) {
            let vm = self.stem.split('.').next().unwrap_or_default();
            if let Some(rest) = name.strip_prefix(&format!("{vm}.")) {
                if let Some((_, after)) = rest.split_once('.') {
                    name = after.to_string();
                }
            }
        }
        let mut q = self.run_dir.join(format!("{}.{name}", self.stem));
        let mut n = 1;
        while self.made.contains(&q) {
            q = self.run_dir.join(format!("{}.{name}.{n}", self.stem));
            n += 1;
        }
        self.made.push(q.clone());
        q
    }

    /// A chardev given as `backend:spec` (`-qmp unix:/p,server=on,wait=off`, `-serial file:/f`).
    fn short_chardev(&mut self, option: &str, arg: &str) -> Result<String, ArgvError> {
        if let Some(rest) = arg.strip_prefix("unix:") {
            let mut parts = split_opts(rest);
            if is_on(opt(&parts, "server")) {
                let path = parts[0].replace(",,", ",");
                parts[0] = self.socket(&path).display().to_string();
                return Ok(format!("unix:{}", parts.join(",")));
            }
        } else if let Some(rest) = arg.strip_prefix("tcp:").or(arg.strip_prefix("telnet:")) {
            if is_on(opt(&split_opts(rest), "server")) {
                return Err(Self::refuse(option, arg, "the source listens on that port"));
            }
        } else if let Some(rest) = arg.strip_prefix("file:") {
            let path = rest.replace(",,", ",");
            return Ok(format!("file:{}", self.file(&path).display()));
        }
        Ok(arg.to_string())
    }

    /// `-chardev backend,id=…,key=value…`.
    fn chardev(&mut self, arg: &str) -> Result<String, ArgvError> {
        let mut parts = split_opts(arg);
        let backend = parts[0].clone();
        for p in parts.iter_mut().skip(1) {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            let v = v.replace(",,", ",");
            if k == "logfile" {
                *p = format!("logfile={}", self.file(&v).display());
            }
        }
        let server = is_on(opt(&parts, "server"));
        match backend.as_str() {
            "socket" if server && opt(&parts, "port").is_some() => Err(Self::refuse(
                "-chardev",
                arg,
                "the source listens on that port",
            )),
            "socket" if server => {
                if let Some(path) = opt(&parts, "path") {
                    let new = self.socket(&path);
                    for p in parts.iter_mut() {
                        if p.starts_with("path=") {
                            *p = format!("path={}", new.display());
                        }
                    }
                }
                Ok(parts.join(","))
            }
            "file" => {
                if let Some(path) = opt(&parts, "path") {
                    let new = self.file(&path);
                    for p in parts.iter_mut() {
                        if p.starts_with("path=") {
                            *p = format!("path={}", new.display());
                        }
                    }
                }
                Ok(parts.join(","))
            }
            _ => Ok(parts.join(",")),
        }
    }
}

/// Why a network backend (`-netdev`, `-nic`, `-net`) cannot be opened a second time.
fn net_refusal(arg: &str) -> Option<&'static str> {
    let parts = split_opts(arg);
    let kind = parts[0].as_str();
    let has = |k: &str| opt(&parts, k).is_some();
    match kind {
        "tap" | "bridge"
            if has("ifname") || has("fd") || has("fds") || has("vhostfd") || has("br") =>
        {
            Some("the source holds that tap (one tap, one QEMU)")
        }
        "bridge" => Some("a bridge helper creates a tap per QEMU on the same bridge: a second NIC with the same MAC"),
        "user" if has("hostfwd") || has("guestfwd") => {
            Some("hostfwd= forwards a host port the source already listens on")
        }
        "socket" | "stream" | "dgram" if has("listen") || has("local") || has("addr") => {
            Some("the source listens on (or is bound to) that address")
        }
        "vde" | "vhost-vdpa" | "l2tpv3" | "netmap" | "af-xdp" => {
            Some("that backend is bound to a host device or port the source holds")
        }
        _ => None,
    }
}

/// The destination's arguments for a VM whose source QEMU ran `src` (argv, program first) in
/// `cwd`, with its QMP socket at `src_qmp` (as the config names it); what the destination
/// makes goes to `run_dir` as `<vm>.<host>.…`. An error names the argument refused.
pub fn destination(
    src: &[String],
    cwd: &Path,
    src_qmp: &Path,
    run_dir: &Path,
    vm: &str,
    host: &str,
) -> Result<Destination, ArgvError> {
    let stem = format!("{vm}.{host}");
    let mut rw = Rewriter {
        run_dir,
        stem: stem.clone(),
        src_qmp,
        cwd,
        qmp: None,
        made: Vec::new(),
    };
    let mut out: Vec<String> = Vec::new();
    let mut i = 1;
    while i < src.len() {
        let tok = &src[i];
        let name = tok.strip_prefix("--").or(tok.strip_prefix('-'));
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            out.push(tok.clone()); // a bare argument (a disk image)
            i += 1;
            continue;
        };
        if NO_ARG.contains(&name) {
            match name {
                "daemonize" | "S" => {}
                "s" => return Err(Rewriter::refuse(tok, "", "a gdb server on tcp::1234")),
                _ => out.push(tok.clone()),
            }
            i += 1;
            continue;
        }
        let Some(arg) = src.get(i + 1) else {
            out.push(tok.clone());
            break;
        };
        i += 2;
        let new = match name {
            "incoming" | "pidfile" | "loadvm" => continue,
            "qmp" | "qmp-pretty" | "monitor" | "serial" | "parallel" | "debugcon" => {
                rw.short_chardev(tok, arg)?
            }
            "chardev" => rw.chardev(arg)?,
            "D" => rw.file(arg).display().to_string(),
            "netdev" | "nic" | "net" => match net_refusal(arg) {
                Some(why) => return Err(Rewriter::refuse(tok, arg, why)),
                None => arg.clone(),
            },
            "vnc" | "gdb" if arg != "none" => {
                return Err(Rewriter::refuse(tok, arg, "the source listens there"))
            }
            "spice" => {
                return Err(Rewriter::refuse(
                    tok,
                    arg,
                    "the source listens on that port",
                ))
            }
            "device" if split_opts(arg)[0].starts_with("vfio") => {
                return Err(Rewriter::refuse(
                    tok,
                    arg,
                    "a host device passes through to one QEMU only",
                ))
            }
            "object"
                if split_opts(arg)[0] == "memory-backend-file"
                    && is_on(opt(&split_opts(arg), "share")) =>
            {
                return Err(Rewriter::refuse(
                    tok,
                    arg,
                    "both QEMUs would map the same file as guest RAM",
                ))
            }
            _ => arg.clone(),
        };
        out.push(tok.clone());
        out.push(new);
    }
    let qmp = rw.qmp.clone().ok_or_else(|| ArgvError::NoQmp {
        qmp: src_qmp.to_path_buf(),
    })?;
    let pidfile = run_dir.join(format!("{stem}.pid"));
    out.extend([
        "-pidfile".into(),
        pidfile.display().to_string(),
        "-incoming".into(),
        "defer".into(),
    ]);
    Ok(Destination {
        args: out,
        qmp,
        pidfile,
        log: run_dir.join(format!("{stem}.log")),
        made: rw.made,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn dest(s: &str) -> Result<Destination, String> {
        let d = destination(
            &argv(s),
            Path::new("/home/u"),
            Path::new("/tmp/t/zk1.qmp"),
            Path::new("/run/cv"),
            "zk1",
            "h1",
        );
        d.map_err(|e| e.to_string())
    }

    #[test]
    fn sockets_files_and_pidfile_move_to_run_dir_and_incoming_is_deferred() {
        let d = dest(
            "qemu -machine q35,accel=tcg -S -daemonize -m 256 -qmp unix:/tmp/t/zk1.qmp,server=on,wait=off \
             -monitor unix:/tmp/t/hmp.sock,server,nowait -serial file:/var/log/zk1.console \
             -chardev socket,id=m,path=/tmp/t/mon2,,x,server=on,wait=off -mon chardev=m,mode=control \
             -chardev socket,id=c,path=/tmp/vhost.sock -pidfile /run/zk1.pid -incoming tcp:0:4444 \
             -drive file=disk.qcow2,if=virtio -kernel bzImage -nographic",
        )
        .unwrap();
        assert_eq!(
            d.args,
            argv(
                "-machine q35,accel=tcg -m 256 -qmp unix:/run/cv/zk1.h1.qmp,server=on,wait=off \
                 -monitor unix:/run/cv/zk1.h1.0.sock,server,nowait -serial file:/run/cv/zk1.h1.zk1.console \
                 -chardev socket,id=m,path=/run/cv/zk1.h1.2.sock,server=on,wait=off -mon chardev=m,mode=control \
                 -chardev socket,id=c,path=/tmp/vhost.sock \
                 -drive file=disk.qcow2,if=virtio -kernel bzImage -nographic \
                 -pidfile /run/cv/zk1.h1.pid -incoming defer"
            )
        );
        assert_eq!(d.qmp, Path::new("/run/cv/zk1.h1.qmp"));
        assert_eq!(d.log, Path::new("/run/cv/zk1.h1.log"));
        assert_eq!(
            d.paths().len(),
            6,
            "qmp, pidfile, log, two sockets, a file: {d:?}"
        );
    }

    #[test]
    fn the_qmp_socket_may_be_a_chardev_relative_to_the_cwd_and_a_second_move_drops_the_old_host() {
        let d = destination(
            &argv(
                "q --chardev socket,id=q,path=zk1.qmp,server=on -mon chardev=q,mode=control \
                 -chardev file,id=f,path=/run/cv/zk1.h0.console,logfile=/run/cv/zk1.h0.chr",
            ),
            Path::new("/tmp/t"),
            Path::new("/tmp/t/zk1.qmp"),
            Path::new("/run/cv"),
            "zk1",
            "h1",
        )
        .unwrap();
        assert_eq!(d.args[1], "socket,id=q,path=/run/cv/zk1.h1.qmp,server=on");
        assert_eq!(
            d.args[5],
            "file,id=f,path=/run/cv/zk1.h1.console,logfile=/run/cv/zk1.h1.chr"
        );
    }

    #[test]
    fn what_cannot_be_duplicated_is_refused_naming_the_argument() {
        for (cmd, needle) in [
            (
                "-netdev tap,id=n0,ifname=tap0,script=no",
                "-netdev tap,id=n0,ifname=tap0,script=no",
            ),
            ("-nic tap,fd=3", "one tap, one QEMU"),
            ("-netdev user,id=u,hostfwd=tcp::2222-:22", "hostfwd="),
            ("-vnc :1", "-vnc :1"),
            ("-s", "gdb"),
            (
                "-chardev socket,id=s,host=0.0.0.0,port=4444,server=on",
                "port",
            ),
            ("-serial tcp::4555,server=on,wait=off", "-serial"),
            ("-device vfio-pci,host=01:00.0", "vfio-pci"),
            (
                "-object memory-backend-file,id=m,size=1G,mem-path=/dev/shm/m,share=on",
                "same file",
            ),
        ] {
            let e = dest(&format!(
                "qemu -qmp unix:/tmp/t/zk1.qmp,server=on,wait=off {cmd}"
            ))
            .unwrap_err();
            assert!(
                e.contains(needle) && e.contains("cannot be duplicated"),
                "{cmd}: {e}"
            );
        }
        // What can: user networking without forwards, no NIC, a socket client, -vnc none.
        let ok = dest(
            "qemu -qmp unix:/tmp/t/zk1.qmp,server=on,wait=off -netdev user,id=u -nic none \
             -vnc none -object memory-backend-ram,id=m0,size=256M -netdev tap,id=t,script=/etc/qemu-ifup",
        );
        assert!(ok.is_ok(), "{ok:?}");
        // Without the config's QMP socket on the command line there is nothing to talk to.
        let e = dest("qemu -qmp unix:/tmp/other.qmp,server=on").unwrap_err();
        assert!(e.contains("/tmp/t/zk1.qmp is not a server socket"), "{e}");
        // A client socket by that name is not a server.
        assert!(dest("qemu -chardev socket,id=q,path=/tmp/t/zk1.qmp").is_err());
    }

    #[test]
    fn a_flag_does_not_swallow_the_next_option() {
        // -nographic has no argument: the -qmp after it is still seen and rewritten.
        let d =
            dest("qemu -nographic -qmp unix:/tmp/t/zk1.qmp,server=on -no-reboot -m 64").unwrap();
        assert_eq!(
            d.args[..5],
            argv("-nographic -qmp unix:/run/cv/zk1.h1.qmp,server=on -no-reboot -m")[..]
        );
    }
}
