//! Kubernetes pods as the kubelet lays out their cgroups, read without a kubelet or an API
//! server: the QoS class of a pod is where its cgroup is.
//!
//! | driver | BestEffort pod | Guaranteed pod | container |
//! |---|---|---|---|
//! | `cgroupfs` | `kubepods/besteffort/pod<uid>` | `kubepods/pod<uid>` | `<id>` |
//! | `systemd` | `kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice` | `kubepods.slice/kubepods-pod<uid>.slice` | `cri-containerd-<id>.scope`, `crio-<id>.scope`, `docker-<id>.scope` |
//!
//! Burstable pods are in `burstable` / `kubepods-burstable.slice` the same way. Under `systemd`
//! the uid's dashes are underscores (a dash separates the slice's levels). The tree is the same
//! in every v1 hierarchy the kubelet manages and in cgroup2.

use std::path::{Path, PathBuf};

use colosched_sys::Cgroupfs;

/// A pod's QoS class (Kubernetes' `status.qosClass`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// The kubelet's cgroup driver, as its pods directory's name says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    Cgroupfs,
    Systemd,
}

/// The kubelet's pods directory (`kubepods` or `kubepods.slice`).
#[derive(Clone, Debug, PartialEq)]
pub struct Kubepods {
    pub dir: PathBuf,
    pub driver: Driver,
}

/// One cgroup of a pod: the pod's own (`container` None) or one in a container's subtree.
#[derive(Clone, Debug, PartialEq)]
pub struct PodCgroup {
    pub uid: String,
    pub qos: Qos,
    pub container: Option<String>,
    pub dir: PathBuf,
}

/// The hierarchies looked in, in order, under the cgroup mounts' root: cgroup2 at the root or
/// at `unified` (hybrid), then the v1 hierarchies every kubelet populates.
const HIERARCHIES: &[&str] = &[
    "",
    "unified",
    "cpu,cpuacct",
    "cpuacct",
    "cpu",
    "pids",
    "memory",
];

/// The kubelet's pods directory under the cgroup mounts `root` (e.g. /sys/fs/cgroup), if any.
pub fn find(root: &Path) -> Option<Kubepods> {
    HIERARCHIES.iter().find_map(|h| {
        ["kubepods.slice", "kubepods"]
            .iter()
            .find_map(|name| Kubepods::at(&root.join(h).join(name)))
    })
}

impl Kubepods {
    /// `dir` as a pods directory, its driver from its name; None if it is not a directory.
    pub fn at(dir: &Path) -> Option<Kubepods> {
        let driver = match dir.file_name()?.to_str()? {
            n if n.ends_with(".slice") => Driver::Systemd,
            _ => Driver::Cgroupfs,
        };
        dir.is_dir().then(|| Kubepods {
            dir: dir.to_path_buf(),
            driver,
        })
    }

    /// Every cgroup of every pod now, with its pod's uid and QoS class. A pod or container
    /// that goes while being read is left out (the kubelet removes them any time).
    pub fn cgroups(&self) -> colosched_sys::error::Result<Vec<PodCgroup>> {
        let mut out = Vec::new();
        for (name, dir) in Cgroupfs::new(&self.dir).children()? {
            match (qos_dir(&name, self.driver), pod_uid(&name, self.driver)) {
                (Some(qos), _) => {
                    for (name, dir) in Cgroupfs::new(&dir).children().unwrap_or_default() {
                        if let Some(uid) = pod_uid(&name, self.driver) {
                            pod(uid, qos, dir, &mut out);
                        }
                    }
                }
                (None, Some(uid)) => pod(uid, Qos::Guaranteed, dir, &mut out),
                (None, None) => {}
            }
        }
        Ok(out)
    }
}

/// The pod's cgroup and every cgroup below it, each labelled with the container (the first
/// level below the pod) it is in.
fn pod(uid: String, qos: Qos, dir: PathBuf, out: &mut Vec<PodCgroup>) {
    let mut stack: Vec<(PathBuf, Option<String>)> = vec![(dir, None)];
    while let Some((dir, container)) = stack.pop() {
        for (name, sub) in Cgroupfs::new(&dir).children().unwrap_or_default() {
            let c = container.clone().or_else(|| Some(container_id(&name)));
            stack.push((sub, c));
        }
        out.push(PodCgroup {
            uid: uid.clone(),
            qos,
            container,
            dir,
        });
    }
}

/// The QoS class a directory directly under the pods directory holds.
fn qos_dir(name: &str, driver: Driver) -> Option<Qos> {
    match (driver, name) {
        (Driver::Cgroupfs, "besteffort") | (Driver::Systemd, "kubepods-besteffort.slice") => {
            Some(Qos::BestEffort)
        }
        (Driver::Cgroupfs, "burstable") | (Driver::Systemd, "kubepods-burstable.slice") => {
            Some(Qos::Burstable)
        }
        _ => None,
    }
}

/// A pod directory's uid, dashed: `pod<uid>` (cgroupfs), `kubepods[-<qos>]-pod<uid>.slice`
/// with the uid's dashes as underscores (systemd).
fn pod_uid(name: &str, driver: Driver) -> Option<String> {
    let uid = match driver {
        Driver::Cgroupfs => name.strip_prefix("pod")?.to_string(),
        Driver::Systemd => {
            let stem = name.strip_prefix("kubepods-")?.strip_suffix(".slice")?;
            let (_, uid) = stem.split_once("pod")?;
            uid.replace('_', "-")
        }
    };
    let ok = !uid.is_empty() && uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    ok.then_some(uid)
}

/// A container cgroup's id: the `<id>` of `cri-containerd-<id>.scope`, `crio-<id>.scope` or
/// `docker-<id>.scope` (systemd), else the name itself (cgroupfs: the id; anything else a
/// runtime made, e.g. `crio-conmon-<id>`, as it is named).
fn container_id(name: &str) -> String {
    ["cri-containerd-", "crio-", "docker-"]
        .iter()
        .find_map(|p| name.strip_prefix(p)?.strip_suffix(".scope"))
        .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or(name)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0b8c7f0e-1d2a-4e3b-9c4d-5e6f7a8b9c0d";
    const CID: &str = "4f1c2b3a";

    /// Makes `paths` (directories) under `root`.
    fn tree(root: &Path, paths: &[String]) {
        for p in paths {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
    }

    fn summary(k: &Kubepods) -> Vec<(String, Qos, Option<String>)> {
        let mut v: Vec<_> = (k.cgroups().unwrap().into_iter())
            .map(|c| (c.uid, c.qos, c.container))
            .collect();
        v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        v
    }

    #[test]
    fn both_drivers_give_the_same_pods() {
        let u = UID.replace('-', "_");
        for (driver, paths) in [
            (
                Driver::Cgroupfs,
                vec![
                    format!("kubepods/besteffort/pod{UID}/{CID}"),
                    format!("kubepods/burstable/podb-1/{CID}"),
                    "kubepods/podg-1/c9".to_string(),
                    "kubepods/podg-1/c8/nested".to_string(),
                ],
            ),
            (
                Driver::Systemd,
                vec![
                    format!(
                        "kubepods.slice/kubepods-besteffort.slice/\
                         kubepods-besteffort-pod{u}.slice/cri-containerd-{CID}.scope"
                    ),
                    format!(
                        "kubepods.slice/kubepods-burstable.slice/\
                         kubepods-burstable-podb_1.slice/crio-{CID}.scope"
                    ),
                    "kubepods.slice/kubepods-podg_1.slice/docker-c9.scope".to_string(),
                    "kubepods.slice/kubepods-podg_1.slice/c8/nested".to_string(),
                ],
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("cpuacct");
            tree(&root, &paths);
            // Not pods: the kubelet's own files and a stray directory.
            tree(&root, &["kubepods/besteffort/notapod".into()]);
            let k = find(dir.path()).expect("found");
            assert_eq!(k.driver, driver);
            let s = |x: &str| Some(x.to_string());
            assert_eq!(
                summary(&k),
                vec![
                    (UID.into(), Qos::BestEffort, None),
                    (UID.into(), Qos::BestEffort, s(CID)),
                    ("b-1".into(), Qos::Burstable, None),
                    ("b-1".into(), Qos::Burstable, s(CID)),
                    ("g-1".into(), Qos::Guaranteed, None),
                    ("g-1".into(), Qos::Guaranteed, s("c8")),
                    ("g-1".into(), Qos::Guaranteed, s("c8")),
                    ("g-1".into(), Qos::Guaranteed, s("c9")),
                ],
                "{driver:?}"
            );
        }
    }

    #[test]
    fn names_that_are_not_the_kubelets() {
        assert_eq!(pod_uid("pod", Driver::Cgroupfs), None);
        assert_eq!(pod_uid("pod../x", Driver::Cgroupfs), None);
        assert_eq!(pod_uid("kubepods-besteffort.slice", Driver::Systemd), None);
        assert_eq!(pod_uid("kubepods-pod.slice", Driver::Systemd), None);
        assert_eq!(pod_uid("system.slice", Driver::Systemd), None);
        assert_eq!(
            container_id("crio-conmon-4f1c.scope"),
            "crio-conmon-4f1c.scope"
        );
        assert_eq!(
            container_id("cri-containerd-.scope"),
            "cri-containerd-.scope"
        );
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find(dir.path()), None);
        // cgroup2 at the root wins over a v1 hierarchy.
        tree(
            dir.path(),
            &["kubepods.slice".into(), "cpu/kubepods".into()],
        );
        assert_eq!(
            find(dir.path()).unwrap().dir,
            dir.path().join("kubepods.slice")
        );
    }

    #[test]
    fn a_pod_removed_while_read_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let k = Kubepods::at(&dir.path().join("kubepods"));
        assert_eq!(k, None, "no directory, no pods directory");
        tree(dir.path(), &["kubepods/besteffort".into()]);
        let k = Kubepods::at(&dir.path().join("kubepods")).unwrap();
        assert!(k.cgroups().unwrap().is_empty());
        std::fs::remove_dir_all(dir.path().join("kubepods")).unwrap();
        assert!(k.cgroups().unwrap().is_empty(), "gone: no pods, no error");
    }
}
