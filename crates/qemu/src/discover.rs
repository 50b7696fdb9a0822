//! Which VMs run on this host, read from a procfs root (tests pass a fake tree in a tempdir).
//!
//! A VM is a QEMU process: its comm or its executable's name starts with `qemu-system-`, or is
//! `qemu-kvm`. From /proc we take:
//! - its **vCPU threads**, by thread name: `CPU <n>/KVM` or `CPU <n>/TCG`. QEMU names its
//!   threads only when started with `-name ...,debug-threads=on` (libvirt always passes it;
//!   checked on QEMU 7.2: without it every thread is called `qemu-system-x86`), so a VM may be
//!   found with no vCPUs: ask its QMP socket (`query-cpus-fast`) then. Single-threaded TCG runs
//!   all vCPUs on one thread, `ALL CPUs/TCG`, which has no vCPU index and is not listed;
//! - its **taps**: `ifname=` of `-netdev tap`, `-nic tap` and `-net tap` on the command line,
//!   then the `iff:` line of the fdinfo of every `/dev/net/tun` descriptor it holds, which also
//!   names the taps libvirt passes as `fd=` and those QEMU named itself (`tap0`, …);
//! - its **QMP socket**: `-qmp unix:PATH`, or a `-mon chardev=ID,mode=control` whose
//!   `-chardev socket,id=ID,path=PATH` is a Unix socket. A relative path is taken from the
//!   process's current directory (wrong if QEMU changed directory since, as `-daemonize` does).
//!   A monitor given as an inherited `fd=` (libvirt) has no path, and is libvirt's anyway;
//! - its **name**: `-name guest=X` or `-name X`, else its pid.
//!
//! A process that exits while it is read is skipped, never an error: every read that fails
//! drops that one process.

use std::path::{Path, PathBuf};

use crate::opts::{opt_value, split_opts};
use colosched_sys::Procfs;

/// How QEMU runs a vCPU, from its thread's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accel {
    Kvm,
    Tcg,
}

/// One vCPU: its index in the guest and the host thread that runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vcpu {
    pub index: u32,
    pub tid: i32,
    pub accel: Accel,
}

/// A VM found on the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vm {
    pub pid: i32,
    /// `-name guest=X`, or the pid.
    pub name: String,
    /// By index; empty when QEMU does not name its threads (see the module doc).
    pub vcpus: Vec<Vcpu>,
    /// Tap interface names, command-line ones first, each once.
    pub taps: Vec<String>,
    /// The QMP socket, if the command line names a Unix one.
    pub qmp: Option<PathBuf>,
}

/// Which VMs to report. Empty lists report every VM; otherwise a VM is reported when its pid
/// is in `pids` or its name in `names` (a config may name a VM either way).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmFilter {
    pub pids: Vec<i32>,
    pub names: Vec<String>,
}

impl VmFilter {
    fn is_empty(&self) -> bool {
        self.pids.is_empty() && self.names.is_empty()
    }
}

/// The VMs under `proc_root` that `filter` lets through, sorted by pid. With only pids in the
/// filter, only those processes are read (no scan of /proc); a pid that is not a QEMU process,
/// or is gone, is left out.
pub fn discover(proc_root: &Path, filter: &VmFilter) -> Vec<Vm> {
    let proc = Procfs::new(proc_root);
    let mut pids = if filter.names.is_empty() && !filter.pids.is_empty() {
        filter.pids.clone()
    } else {
        proc.pids()
    };
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter()
        .filter_map(|pid| vm_of(&proc, pid))
        .filter(|vm| {
            filter.is_empty() || filter.pids.contains(&vm.pid) || filter.names.contains(&vm.name)
        })
        .collect()
}

/// One process as a VM; `None` if it is not QEMU or vanished while being read.
pub fn read_vm(proc_root: &Path, pid: i32) -> Option<Vm> {
    vm_of(&Procfs::new(proc_root), pid)
}

fn vm_of(proc: &Procfs, pid: i32) -> Option<Vm> {
    let comm = proc.comm(pid)?;
    let exe = proc.exe(pid).ok();
    let exe_name = exe
        .as_deref()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str());
    if !is_qemu(&comm, exe_name) {
        return None;
    }
    // A zombie, or a process past exit, has an empty command line.
    let cmdline = proc.cmdline(pid).ok()?;
    let args = split_cmdline(&cmdline);
    if args.is_empty() {
        return None;
    }
    let parsed = parse_args(&args);
    let tids = proc.tids(pid);
    if tids.is_empty() {
        return None; // a live process has at least its main thread
    }
    let mut vcpus: Vec<Vcpu> = tids
        .into_iter()
        .filter_map(|tid| {
            let name = proc.task_comm(pid, tid)?;
            let (index, accel) = vcpu_thread(&name)?;
            Some(Vcpu { index, tid, accel })
        })
        .collect();
    vcpus.sort_by_key(|v| v.index);
    vcpus.dedup_by_key(|v| v.index);
    let mut taps = parsed.taps;
    for tap in tun_fds(proc, pid) {
        if !taps.contains(&tap) {
            taps.push(tap);
        }
    }
    let qmp = parsed.qmp.map(|p| {
        if p.is_relative() {
            match proc.cwd(pid) {
                Ok(cwd) => cwd.join(p),
                Err(_) => p,
            }
        } else {
            p
        }
    });
    Some(Vm {
        pid,
        name: parsed.name.unwrap_or_else(|| pid.to_string()),
        vcpus,
        taps,
        qmp,
    })
}

/// Whether a process is QEMU, by its comm (at most 15 bytes: `qemu-system-x86`) or its
/// executable's file name (`-name ...,process=X` renames the comm, not the executable).
pub fn is_qemu(comm: &str, exe_name: Option<&str>) -> bool {
    let q = |n: &str| n.starts_with("qemu-system-") || n == "qemu-kvm";
    q(comm) || exe_name.is_some_and(q)
}

/// `CPU <n>/KVM` or `CPU <n>/TCG` → (n, accel).
pub fn vcpu_thread(comm: &str) -> Option<(u32, Accel)> {
    let (index, accel) = comm.strip_prefix("CPU ")?.split_once('/')?;
    let accel = match accel {
        "KVM" => Accel::Kvm,
        "TCG" => Accel::Tcg,
        _ => return None,
    };
    Some((index.parse().ok()?, accel))
}

/// What the command line says about a VM.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QemuArgs {
    pub name: Option<String>,
    pub taps: Vec<String>,
    pub qmp: Option<PathBuf>,
}

/// Reads the options QEMU was started with (`args[0]` is the program). Options may be written
/// `-opt` or `--opt`; an option missing its value, or a value without the keys looked for, is
/// passed over.
pub fn parse_args(args: &[String]) -> QemuArgs {
    let mut out = QemuArgs::default();
    // (chardev id, unix socket path) of every `-chardev socket,path=`, and the chardev ids of
    // `-mon ...,mode=control`: matched once all are read (either may come first).
    let mut sockets: Vec<(String, String)> = Vec::new();
    let mut control_mons: Vec<String> = Vec::new();
    let mut qmp_unix: Option<String> = None;
    let mut i = 1;
    while i < args.len() {
        let Some(opt) = args[i].strip_prefix("--").or(args[i].strip_prefix('-')) else {
            i += 1;
            continue;
        };
        let Some(value) = args.get(i + 1) else {
            break;
        };
        match opt {
            "name" => {
                if let Some(g) = opt_value(value, "guest", true) {
                    out.name.get_or_insert(g);
                }
            }
            "netdev" | "nic" | "net" => {
                if opt_value(value, "type", true).as_deref() == Some("tap") {
                    if let Some(ifname) = opt_value(value, "ifname", false) {
                        if !out.taps.contains(&ifname) {
                            out.taps.push(ifname);
                        }
                    }
                }
            }
            "qmp" => {
                if let Some(path) = split_opts(value, true)
                    .first()
                    .and_then(|b| b.strip_prefix("unix:"))
                {
                    qmp_unix.get_or_insert(path.to_string());
                }
            }
            "chardev" => {
                let backend = opt_value(value, "backend", true);
                if let (Some("socket"), Some(id), Some(path)) = (
                    backend.as_deref(),
                    opt_value(value, "id", false),
                    opt_value(value, "path", false),
                ) {
                    sockets.push((id, path));
                }
            }
            "mon" => {
                if opt_value(value, "mode", false).as_deref() == Some("control") {
                    if let Some(id) = opt_value(value, "chardev", true) {
                        control_mons.push(id);
                    }
                }
            }
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    out.qmp = qmp_unix
        .or_else(|| {
            control_mons.iter().find_map(|id| {
                sockets
                    .iter()
                    .find(|(sid, _)| sid == id)
                    .map(|(_, p)| p.clone())
            })
        })
        .map(PathBuf::from);
    out
}

/// /proc/<pid>/cmdline: NUL-terminated arguments (not UTF-8-checked: a stray byte becomes
/// U+FFFD).
fn split_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The taps behind the process's /dev/net/tun descriptors (`iff:` in their fdinfo), in
/// descriptor order, each once (a multiqueue tap is opened once per queue).
fn tun_fds(proc: &Procfs, pid: i32) -> Vec<String> {
    let mut out = Vec::new();
    for fd in proc.fds(pid) {
        if proc.fd_target(pid, fd).as_deref() != Some(Path::new("/dev/net/tun")) {
            continue;
        }
        let Some(info) = proc.fdinfo(pid, fd) else {
            continue;
        };
        if let Some(name) = info.lines().find_map(|l| l.strip_prefix("iff:")) {
            let name = name.trim().to_string();
            if !name.is_empty() && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Qemu, QemuOpts};
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A fake /proc: processes with a comm, an exe link, a command line and named threads.
    struct FakeProc {
        dir: tempfile::TempDir,
    }

    impl FakeProc {
        fn new() -> FakeProc {
            FakeProc {
                dir: tempfile::tempdir().unwrap(),
            }
        }

        fn root(&self) -> &Path {
            self.dir.path()
        }

        /// A process `pid` named `comm`, run from `exe`, with arguments `args` and threads
        /// (tid, name).
        fn process(&self, pid: i32, comm: &str, exe: &str, args: &[&str], threads: &[(i32, &str)]) {
            let d = self.root().join(pid.to_string());
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("comm"), format!("{comm}\n")).unwrap();
            symlink(exe, d.join("exe")).unwrap();
            let mut cmdline = Vec::new();
            for a in args {
                cmdline.extend_from_slice(a.as_bytes());
                cmdline.push(0);
            }
            fs::write(d.join("cmdline"), cmdline).unwrap();
            for (tid, name) in threads {
                let t = d.join(format!("task/{tid}"));
                fs::create_dir_all(&t).unwrap();
                fs::write(t.join("comm"), format!("{name}\n")).unwrap();
            }
        }

        /// Descriptor `fd` of `pid` open on /dev/net/tun for `tap`.
        fn tun_fd(&self, pid: i32, fd: i32, tap: &str) {
            let d = self.root().join(pid.to_string());
            fs::create_dir_all(d.join("fd")).unwrap();
            fs::create_dir_all(d.join("fdinfo")).unwrap();
            symlink("/dev/net/tun", d.join(format!("fd/{fd}"))).unwrap();
            let info = format!("pos:\t0\nflags:\t0104002\nmnt_id:\t58\nino:\t105\niff:\t{tap}\n");
            fs::write(d.join(format!("fdinfo/{fd}")), info).unwrap();
        }
    }

    const QEMU: &str = "/usr/bin/qemu-system-x86_64";

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn kvm_and_tcg_vms_with_their_vcpus_taps_and_qmp() {
        let p = FakeProc::new();
        p.process(
            300,
            "qemu-system-x86",
            QEMU,
            &[
                "qemu-system-x86_64",
                "-name",
                "guest=web,debug-threads=on",
                "-netdev",
                "tap,id=n0,ifname=tap-web0,script=no,downscript=no",
                "-device",
                "virtio-net-pci,netdev=n0",
                "-netdev",
                "tap,id=n1,ifname=tap-web1,vhost=on",
                "-nic",
                "tap,ifname=tap-web2,model=virtio",
                "-netdev",
                "user,id=n3",
                "-qmp",
                "unix:/run/web.qmp,server=on,wait=off",
            ],
            &[
                (300, "qemu-system-x86"),
                (301, "call_rcu"),
                (303, "CPU 1/KVM"),
                (302, "CPU 0/KVM"),
                (304, "IO mon_iothread"),
            ],
        );
        p.process(
            200,
            "qemu-system-x86",
            QEMU,
            &[
                "qemu-system-x86_64",
                "--name",
                "batch",
                "-chardev",
                "socket,id=mon0,path=/tmp/a,,b.sock,server=on,wait=off",
                "-mon",
                "chardev=mon0,mode=control",
            ],
            &[
                (200, "qemu-system-x86"),
                (205, "CPU 10/TCG"),
                (204, "CPU 2/TCG"),
            ],
        );
        let vms = discover(p.root(), &VmFilter::default());
        assert_eq!(vms.len(), 2);
        let (batch, web) = (&vms[0], &vms[1]);
        assert_eq!(
            (batch.pid, batch.name.as_str()),
            (200, "batch"),
            "sorted by pid"
        );
        assert_eq!(
            batch.vcpus,
            vec![
                Vcpu {
                    index: 2,
                    tid: 204,
                    accel: Accel::Tcg
                },
                Vcpu {
                    index: 10,
                    tid: 205,
                    accel: Accel::Tcg
                },
            ],
            "sorted by index, not by name"
        );
        assert_eq!(
            batch.qmp.as_deref(),
            Some(Path::new("/tmp/a,b.sock")),
            "`,,` is a comma"
        );
        assert!(batch.taps.is_empty());
        assert_eq!(web.name, "web");
        assert_eq!(
            web.vcpus,
            vec![
                Vcpu {
                    index: 0,
                    tid: 302,
                    accel: Accel::Kvm
                },
                Vcpu {
                    index: 1,
                    tid: 303,
                    accel: Accel::Kvm
                },
            ]
        );
        assert_eq!(web.taps, strings(&["tap-web0", "tap-web1", "tap-web2"]));
        assert_eq!(web.qmp.as_deref(), Some(Path::new("/run/web.qmp")));
    }

    #[test]
    fn non_qemu_processes_and_odd_thread_names_are_ignored() {
        let p = FakeProc::new();
        p.process(
            10,
            "bash",
            "/usr/bin/bash",
            &["bash", "-name", "x"],
            &[(10, "bash")],
        );
        // A thread called like a vCPU does not make a process a VM.
        p.process(11, "java", "/usr/bin/java", &["java"], &[(12, "CPU 0/KVM")]);
        p.process(
            20,
            "qemu-system-x86",
            QEMU,
            &["qemu-system-x86_64"],
            &[
                (20, "qemu-system-x86"),
                (21, "ALL CPUs/TCG"),
                (22, "CPU x/KVM"),
                (23, "CPU 1/HVF"),
                (24, "CPU 3"),
                (25, "CPU 0/KVM"),
            ],
        );
        // Found by its executable although `-name process=` renamed it; qemu-kvm by comm.
        p.process(30, "vm30", QEMU, &["qemu-system-x86_64"], &[(30, "vm30")]);
        p.process(
            40,
            "qemu-kvm",
            "/usr/libexec/qemu-kvm",
            &["qemu-kvm"],
            &[(40, "qemu-kvm")],
        );
        fs::create_dir_all(p.root().join("self")).unwrap();
        fs::write(p.root().join("uptime"), "1 2\n").unwrap();
        let vms = discover(p.root(), &VmFilter::default());
        let pids: Vec<i32> = vms.iter().map(|v| v.pid).collect();
        assert_eq!(pids, vec![20, 30, 40]);
        assert_eq!(
            vms[0].vcpus,
            vec![Vcpu {
                index: 0,
                tid: 25,
                accel: Accel::Kvm
            }]
        );
        assert_eq!(vms[0].name, "20", "no -name: the pid");
        assert_eq!(vms[0].qmp, None);
        assert!(vms[1].vcpus.is_empty(), "threads not named: ask QMP");
    }

    #[test]
    fn a_process_that_vanishes_is_skipped() {
        let p = FakeProc::new();
        let args = ["qemu-system-x86_64", "-name", "gone"];
        // Gone before its cmdline was read (comm only), a zombie (empty cmdline), gone before
        // its threads were listed (no task dir), and a pid dir with nothing in it.
        p.process(5, "qemu-system-x86", QEMU, &args, &[(5, "CPU 0/TCG")]);
        fs::remove_file(p.root().join("5/cmdline")).unwrap();
        p.process(6, "qemu-system-x86", QEMU, &[], &[(6, "CPU 0/TCG")]);
        p.process(7, "qemu-system-x86", QEMU, &args, &[]);
        fs::create_dir_all(p.root().join("8")).unwrap();
        p.process(
            9,
            "qemu-system-x86",
            QEMU,
            &["qemu-system-x86_64"],
            &[(9, "x")],
        );
        let vms = discover(p.root(), &VmFilter::default());
        assert_eq!(vms.iter().map(|v| v.pid).collect::<Vec<_>>(), vec![9]);
        assert_eq!(read_vm(p.root(), 12345), None, "never there");
    }

    #[test]
    fn missing_and_odd_arguments() {
        let a = |v: &[&str]| parse_args(&strings(v));
        // An option at the end without its value; options without the keys looked for.
        let q = a(&[
            "qemu",
            "-netdev",
            "tap,id=n0", // no ifname
            "-netdev",
            "bridge,id=n1,br=br0,ifname=notatap",
            "-nic",
            "user,ifname=nope",
            "-qmp",
            "tcp:127.0.0.1:4444,server=on",
            "-mon",
            "chardev=m1", // readline (HMP), not control
            "-chardev",
            "socket,id=m1,path=/run/hmp.sock",
            "-name",
        ]);
        assert_eq!(q, QemuArgs::default());
        // Type given as a key; a legacy -net tap; the first -qmp unix wins over a control mon;
        // a name given as `guest=` after other keys; stray positional arguments.
        let q = a(&[
            "qemu",
            "disk.img",
            "-netdev",
            "type=tap,ifname=t1,id=x",
            "-net",
            "tap,ifname=t2",
            "-net",
            "tap,ifname=t1", // the same tap once
            "-mon",
            "chardev=c0,mode=control",
            "-chardev",
            "socket,id=c0,path=/run/mon.sock",
            "-qmp",
            "unix:/run/q.sock",
            "-name",
            "process=p,guest=g",
        ]);
        assert_eq!(q.taps, strings(&["t1", "t2"]));
        assert_eq!(q.qmp, Some(PathBuf::from("/run/q.sock")));
        assert_eq!(q.name.as_deref(), Some("g"));
        // The -mon may come before its -chardev; a chardev that is not a socket is no QMP.
        let q = a(&[
            "qemu",
            "-mon",
            "chardev=c0,mode=control",
            "-chardev",
            "socket,id=c0,path=/run/mon.sock",
        ]);
        assert_eq!(q.qmp, Some(PathBuf::from("/run/mon.sock")));
        let q = a(&[
            "qemu",
            "-chardev",
            "pty,id=c0,path=/dev/x",
            "-mon",
            "chardev=c0,mode=control",
            "-chardev",
            "socket,id=c9,fd=23,server=on", // libvirt's: an inherited fd, no path
            "-mon",
            "chardev=c9,mode=control",
        ]);
        assert_eq!(q.qmp, None);
        assert_eq!(split_cmdline(b""), Vec::<String>::new());
        assert_eq!(split_cmdline(b"a\0\0b\0"), strings(&["a", "", "b"]));
        assert_eq!(split_cmdline(b"a\xffb\0"), strings(&["a\u{fffd}b"]));
    }

    #[test]
    fn taps_from_tun_descriptors_and_relative_qmp_paths() {
        let p = FakeProc::new();
        p.process(
            50,
            "qemu-system-x86",
            QEMU,
            &[
                "qemu-system-x86_64",
                "-netdev",
                "tap,id=n0,ifname=tap1",
                "-netdev",
                "tap,id=n1,fds=30:31", // libvirt's multiqueue tap: two fds, no name
                "-qmp",
                "unix:run/q.sock,server",
            ],
            &[(50, "CPU 0/KVM")],
        );
        p.tun_fd(50, 29, "tap1");
        p.tun_fd(50, 30, "vnet7");
        p.tun_fd(50, 31, "vnet7");
        // A descriptor that is not the tun device, and a tun one without fdinfo.
        symlink("/dev/null", p.root().join("50/fd/0")).unwrap();
        symlink("/dev/net/tun", p.root().join("50/fd/40")).unwrap();
        symlink("/var/lib/vm", p.root().join("50/cwd")).unwrap();
        let vm = read_vm(p.root(), 50).unwrap();
        assert_eq!(vm.taps, strings(&["tap1", "vnet7"]));
        assert_eq!(vm.qmp, Some(PathBuf::from("/var/lib/vm/run/q.sock")));
    }

    #[test]
    fn filters_by_pid_or_name() {
        let p = FakeProc::new();
        for (pid, name) in [(100, "a"), (200, "b"), (300, "c")] {
            let guest = format!("guest={name}");
            p.process(
                pid,
                "qemu-system-x86",
                QEMU,
                &["qemu-system-x86_64", "-name", &guest],
                &[(pid, "x")],
            );
        }
        p.process(
            400,
            "sleep",
            "/usr/bin/sleep",
            &["sleep"],
            &[(400, "sleep")],
        );
        let pids =
            |f: VmFilter| -> Vec<i32> { discover(p.root(), &f).iter().map(|v| v.pid).collect() };
        assert_eq!(
            pids(VmFilter {
                pids: vec![300, 100, 400, 999, 100],
                names: vec![]
            }),
            vec![100, 300],
            "not QEMU, gone, named twice"
        );
        assert_eq!(
            pids(VmFilter {
                pids: vec![],
                names: strings(&["b", "z"])
            }),
            vec![200]
        );
        assert_eq!(
            pids(VmFilter {
                pids: vec![100],
                names: strings(&["c"])
            }),
            vec![100, 300]
        );
        assert_eq!(pids(VmFilter::default()), vec![100, 200, 300]);
    }

    #[test]
    fn a_real_qemu_is_found_with_its_vcpu_threads_tap_and_socket() {
        let q = Qemu::spawn(&QemuOpts {
            name: "disc",
            smp: 2,
            tap: Some("cst0"),
        });
        let vms = discover(
            Path::new("/proc"),
            &VmFilter {
                pids: vec![q.pid],
                names: vec![],
            },
        );
        assert_eq!(vms.len(), 1, "{vms:?}");
        let vm = &vms[0];
        assert_eq!((vm.pid, vm.name.as_str()), (q.pid, "disc"));
        assert_eq!(vm.qmp.as_deref(), Some(q.qmp.as_path()));
        assert_eq!(vm.taps, strings(&["cst0"]));
        let idx: Vec<u32> = vm.vcpus.iter().map(|v| v.index).collect();
        assert_eq!(idx, vec![0, 1], "{vm:?}");
        assert!(vm
            .vcpus
            .iter()
            .all(|v| v.accel == Accel::Tcg && v.tid != q.pid));
        // Found by name too, among whatever else runs here.
        let by_name = discover(
            Path::new("/proc"),
            &VmFilter {
                pids: vec![],
                names: vec!["disc".into()],
            },
        );
        assert_eq!(
            by_name.iter().map(|v| v.pid).collect::<Vec<_>>(),
            vec![q.pid]
        );
        let pid = q.pid;
        drop(q);
        assert_eq!(read_vm(Path::new("/proc"), pid), None, "killed and reaped");
    }
}
