//! The selection rules: of the processes the selectors name, which are BE. Kernel threads and
//! tasks whose affinity the kernel fixes never are (nor init, nor the agent: see
//! `sense::select::Selector::candidates`).

use crate::sense::select::BeTask;
use colosched_sys::procfs::{TaskStat, PF_KTHREAD, PF_NO_SETAFFINITY};

/// What one selection pass found, with the reasons tasks were left alone.
#[derive(Debug, Default)]
pub struct Selection {
    pub tasks: Vec<BeTask>,
    pub kernel_threads: usize,
}

impl Selection {
    /// The BE processes of these (pid, /proc/<pid>/stat) pairs; kernel threads and tasks whose
    /// affinity the kernel fixes are dropped here.
    pub fn of(stats: impl IntoIterator<Item = (i32, TaskStat)>) -> Selection {
        let mut sel = Selection::default();
        for (pid, st) in stats {
            if st.flags & (PF_KTHREAD | PF_NO_SETAFFINITY) != 0 {
                sel.kernel_threads += 1;
                continue;
            }
            sel.tasks.push(BeTask {
                pid,
                comm: st.comm,
                ppid: st.ppid,
                starttime: st.starttime,
                cpu_ticks: st.cpu_ticks,
                num_threads: st.num_threads,
                rss_pages: st.rss_pages,
                faults: st.minflt + st.majflt,
                processor: st.processor,
                threads: None,
            });
        }
        sel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::{self, Fake};
    use crate::sense::select::Selector;
    use colosched_sys::Procfs;
    use regex_lite::Regex;

    #[test]
    fn selectors_union_and_exclusions() {
        let f = Fake::new();
        for (pid, comm, flags, cpu, ticks) in [
            (10, "stress", 0, 0, 100),
            (11, "memcached", 0, 1, 100),
            (12, "kworker/0:1", PF_KTHREAD, 0, 5),
            (13, "ksoftirqd/0", PF_KTHREAD | PF_NO_SETAFFINITY, 0, 5),
            (14, "batch", 0, 1, 7),
        ] {
            fake::process(&f.proc, pid, comm, flags, cpu, ticks);
        }
        let cg = f.cgroup("cg", &[("cgroup.procs", "12\n14\n99\n")]); // 99 is gone
        let pidfile = f.root.join("be.pids");
        std::fs::write(&pidfile, "13\n\nnot-a-pid\n").unwrap();
        let mut sel = Selector {
            cgroups: vec![cg, f.root.join("missing")],
            comm: Some(Regex::new("^(stress|kworker)").unwrap()),
            pid_files: vec![pidfile],
            all: false,
            ..Default::default()
        };
        let procfs = Procfs::new(&f.proc);
        let (pids, errors) = sel.candidates(&procfs);
        let s = Selection::of(sel.details(&procfs, &pids));
        let pids: Vec<i32> = s.tasks.iter().map(|t| t.pid).collect();
        assert_eq!(
            pids,
            vec![10, 14],
            "memcached is LC; kernel threads never BE"
        );
        assert_eq!(s.kernel_threads, 2);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("be.pids:3: not a pid")));
        assert_eq!(s.tasks[0].cpu_ticks, 100);
        assert_eq!(s.tasks[1].processor, 1);
    }

    #[test]
    fn the_pods_of_the_be_qos_classes_are_be_and_read_fresh_each_look() {
        use crate::sense::kubernetes::Kubepods;
        use crate::sense::select::{PodRef, Pods};
        let f = Fake::new();
        for pid in 20..=24 {
            fake::process(&f.proc, pid, "app", 0, 0, 1);
        }
        let dir = |name: &str, pids: &str| f.cgroup(name, &[("cgroup.procs", pids)]);
        dir("kubepods/besteffort/podbe-1", "");
        dir("kubepods/besteffort/podbe-1/c1", "20\n21\n");
        dir("kubepods/burstable/podbu-1/c2", "22\n");
        dir("kubepods/podg-1/c3", "23\n");
        let kubepods = Kubepods::at(&f.root.join("kubepods")).unwrap();
        let mut sel = Selector {
            kubernetes: Some(Pods {
                kubepods,
                burstable_be: false,
            }),
            ..Default::default()
        };
        let procfs = Procfs::new(&f.proc);
        let (pids, errors) = sel.candidates(&procfs);
        assert_eq!((pids, errors.len()), (vec![20, 21], 0), "BestEffort only");
        let c1 = PodRef {
            uid: "be-1".into(),
            container: Some("c1".into()),
        };
        assert_eq!(sel.pods.get(&20), Some(&c1));
        // A pod made since (its pause process in the pod's own cgroup), one deleted, and
        // Burstable as BE: the next look sees them.
        dir("kubepods/besteffort/podbe-2", "24\n");
        std::fs::remove_dir_all(f.root.join("kubepods/besteffort/podbe-1")).unwrap();
        sel.kubernetes.as_mut().unwrap().burstable_be = true;
        let (pids, _) = sel.candidates(&procfs);
        assert_eq!(pids, vec![22, 24], "never the Guaranteed pod's 23");
        assert_eq!(
            sel.pods.get(&24),
            Some(&PodRef {
                uid: "be-2".into(),
                container: None
            })
        );
        assert_eq!(sel.pods.get(&20), None, "a deleted pod's labels go with it");
        assert!(sel
            .pods_summary()
            .unwrap()
            .contains("1 BestEffort, 1 Burstable (BE), 1 Guaranteed"));
    }
}
