//! The host's core classes for spec 001 (IA): which usable CPUs are fast and which slow, and
//! each one's scaled factor SF (its speed over the slowest's), as a `decide::ia::Platform`.
//! Read under a sysfs root (tests pass a fake tree), in this order:
//!
//! 1. a **class map** from the configuration (`{fast = [0], slow = [1], sf_fast = 1.5}`), which
//!    overrides everything: the way to test on a host whose CPUs are all alike (this one);
//! 2. **Intel hybrid**: `devices/cpu_core/cpus` (P-cores) and `devices/cpu_atom/cpus`
//!    (E-cores), CPU lists. SF = the P-cores' mean `cpufreq/cpuinfo_max_freq` over the
//!    E-cores', else the same with `cpu_capacity`, else [`HYBRID_DEFAULT_SF`];
//! 3. **`cpu_capacity`** (`devices/system/cpu/cpuN/cpu_capacity`: arm, and x86 since about
//!    6.12) when it differs between CPUs: SF = capacity / the smallest;
//! 4. **`cpufreq/cpuinfo_max_freq`** when it differs between CPUs: SF = freq / the lowest;
//! 5. otherwise one class.
//!
//! Every CPU of a class gets the same SF, so `Platform::class` (fast = faster than the
//! slowest) gives back exactly these classes. IA knows two classes: a source that shows three
//! or more speeds is an error that asks for a class map. A file that exists but does not parse
//! is an error naming it; a source whose files are missing for some usable CPU is skipped.
//!
//! **One class** (a symmetric host, or usable CPUs all of one kind) is not an error: the result
//! says so (`single_class`). IA then degenerates: there is no fast class, so placement can only
//! spread vCPUs over identical cores, which the kernel's own load balancing does better without
//! pinning. The caller should then pin nothing (leave the vCPUs to the kernel), log `source`,
//! and run no rotation.
//!
//! SMT siblings are CPUs here like any other (Intel P-cores list both threads of a core in
//! `cpu_core/cpus`); a caller that wants one vCPU per physical core passes one sibling only.

use std::path::Path;

use serde::Deserialize;

use crate::decide::ia::{CoreClass, Platform};
use colosched_core::cpuset::CpuSet;
use colosched_sys::Sysfs;

/// SF of a P-core over an E-core when sysfs gives neither frequencies nor capacities
/// (assumed, not measured): Alder/Raptor Lake P-cores reach 1.25–1.3 times the E-cores' top
/// clock and do about 1.2 times the work per clock. A class map overrides it.
pub const HYBRID_DEFAULT_SF: f64 = 1.5;

/// Classes from the configuration: CPU ids of each class and the fast class's SF (the slow
/// one's is 1).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassMap {
    pub fast: Vec<usize>,
    pub slow: Vec<usize>,
    pub sf_fast: f64,
}

/// The usable CPUs as IA sees them.
#[derive(Clone, Debug, PartialEq)]
pub struct HostClasses {
    /// The usable CPU ids, ascending: IA's core `i` is CPU `cpus[i]`.
    pub cpus: Vec<usize>,
    /// SF of each core (same order as `cpus`).
    pub platform: Platform,
    /// Where the classes came from, for the log (like the node agent's topology `source`).
    pub source: String,
}

impl HostClasses {
    /// The CPU ids of one class, ascending.
    pub fn cpus_of(&self, class: CoreClass) -> Vec<usize> {
        let cores = self.platform.cores_of(class);
        cores.into_iter().map(|c| self.cpus[c]).collect()
    }

    /// No fast class: see the module doc for what the caller should do.
    pub fn single_class(&self) -> bool {
        self.platform.n_fast() == 0
    }
}

/// What is wrong, and where: a file under the sysfs root, or a class-map key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassError {
    pub place: String,
    pub why: String,
}

impl std::fmt::Display for ClassError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place, self.why)
    }
}

impl std::error::Error for ClassError {}

fn error(place: impl Into<String>, why: impl Into<String>) -> ClassError {
    ClassError {
        place: place.into(),
        why: why.into(),
    }
}

/// The classes of the CPUs `usable` (any order; duplicates ignored) of the host whose sysfs is
/// mounted at `sysfs` (`/sys`), or from `map` when given.
pub fn read_classes(
    sysfs: &Path,
    usable: &[usize],
    map: Option<&ClassMap>,
) -> Result<HostClasses, ClassError> {
    let mut cpus = usable.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(error("usable CPUs", "none given"));
    }
    if let Some(map) = map {
        return from_map(cpus, map);
    }
    let sysfs = &Sysfs::new(sysfs);
    if let Some(found) = hybrid(sysfs, &cpus)? {
        return Ok(found);
    }
    let mut notes = vec!["no devices/cpu_core and devices/cpu_atom".to_string()];
    for file in ["cpu_capacity", "cpufreq/cpuinfo_max_freq"] {
        match per_cpu(sysfs, &cpus, file)? {
            None => notes.push(format!("{file} missing for a usable CPU")),
            Some(values) => {
                let kinds = distinct(&values);
                if kinds.len() == 2 {
                    let freqs: Vec<f64> = values.iter().map(|&v| v as f64).collect();
                    let source = format!("{file}: {} and {}", kinds[0], kinds[1]);
                    return Ok(classes(cpus, Platform::from_freqs(&freqs), source));
                }
                if kinds.len() > 2 {
                    return Err(error(
                        format!("{}/cpuN/{file}", sysfs.cpu_dir().display()),
                        format!(
                            "{} different values ({}): IA knows two classes; give a class map",
                            kinds.len(),
                            join(&kinds)
                        ),
                    ));
                }
                notes.push(format!("{file} {} on every CPU", kinds[0]));
            }
        }
    }
    let sf = vec![1.0; cpus.len()];
    let source = format!("one class ({})", notes.join("; "));
    Ok(classes(cpus, Platform { sf }, source))
}

fn classes(cpus: Vec<usize>, platform: Platform, source: String) -> HostClasses {
    HostClasses {
        cpus,
        platform,
        source,
    }
}

/// Fast CPUs get `sf_fast`, the others 1.
fn two_classes(cpus: Vec<usize>, fast: &[usize], sf_fast: f64, source: String) -> HostClasses {
    let sf = cpus
        .iter()
        .map(|c| if fast.contains(c) { sf_fast } else { 1.0 })
        .collect();
    classes(cpus, Platform { sf }, source)
}

fn from_map(cpus: Vec<usize>, map: &ClassMap) -> Result<HostClasses, ClassError> {
    for (key, list) in [("fast", &map.fast), ("slow", &map.slow)] {
        let place = format!("class map: `{key}`");
        if list.is_empty() {
            return Err(error(place, "has no CPU"));
        }
        if let Some(c) = list.iter().find(|c| !cpus.contains(c)) {
            let why = format!(
                "CPU {c} is not usable (usable: {})",
                CpuSet::from_slice(&cpus)
            );
            return Err(error(place, why));
        }
    }
    if let Some(c) = map.fast.iter().find(|c| map.slow.contains(c)) {
        return Err(error(
            "class map",
            format!("CPU {c} is in `fast` and `slow`"),
        ));
    }
    let all: Vec<usize> = map.fast.iter().chain(&map.slow).copied().collect();
    if let Some(c) = cpus.iter().find(|c| !all.contains(c)) {
        let why = format!("usable CPU {c} is in neither `fast` nor `slow`");
        return Err(error("class map", why));
    }
    if !(map.sf_fast.is_finite() && map.sf_fast > 1.0) {
        let why = format!("{} must be a number above 1", map.sf_fast);
        return Err(error("class map: `sf_fast`", why));
    }
    let source = format!(
        "class map: fast {} (SF {}), slow {}",
        CpuSet::from_slice(&map.fast),
        map.sf_fast,
        CpuSet::from_slice(&map.slow)
    );
    Ok(two_classes(cpus, &map.fast, map.sf_fast, source))
}

/// Intel hybrid, when both PMU CPU lists exist.
fn hybrid(sysfs: &Sysfs, cpus: &[usize]) -> Result<Option<HostClasses>, ClassError> {
    let (core, atom) = (sysfs.pmu_cpus("cpu_core"), sysfs.pmu_cpus("cpu_atom"));
    let (p_cores, e_cores) = match (core, atom) {
        (Ok(None), _) | (_, Ok(None)) => return Ok(None),
        (Err(e), _) | (_, Err(e)) => return Err(read_error(e)),
        (Ok(Some(p)), Ok(Some(e))) => (p, e),
    };
    for &c in cpus {
        let (p, e) = (p_cores.contains(c), e_cores.contains(c));
        if p == e {
            let where_ = if p { "both lists" } else { "neither list" };
            let (core_path, atom_path) = (
                sysfs.pmu_cpus_file("cpu_core"),
                sysfs.pmu_cpus_file("cpu_atom"),
            );
            let place = format!("{} and {}", core_path.display(), atom_path.display());
            return Err(error(place, format!("usable CPU {c} is in {where_}")));
        }
    }
    let fast: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|&c| p_cores.contains(c))
        .collect();
    let slow: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|&c| e_cores.contains(c))
        .collect();
    let lists = "devices/cpu_core/cpus and devices/cpu_atom/cpus";
    if fast.is_empty() || slow.is_empty() {
        let kind = if slow.is_empty() {
            "P-cores"
        } else {
            "E-cores"
        };
        let source = format!("one class (intel hybrid, {lists}: the usable CPUs are all {kind})");
        return Ok(Some(classes(
            cpus.to_vec(),
            Platform {
                sf: vec![1.0; cpus.len()],
            },
            source,
        )));
    }
    let (sf, how) = hybrid_sf(sysfs, &fast, &slow)?;
    let source = format!(
        "intel hybrid ({lists}): P-cores {}, E-cores {}, SF {sf:.3} {how}",
        CpuSet::from_slice(&fast),
        CpuSet::from_slice(&slow)
    );
    Ok(Some(two_classes(cpus.to_vec(), &fast, sf, source)))
}

/// The P-cores' SF over the E-cores and where it came from.
fn hybrid_sf(sysfs: &Sysfs, fast: &[usize], slow: &[usize]) -> Result<(f64, String), ClassError> {
    let mut skipped = Vec::new();
    for file in ["cpufreq/cpuinfo_max_freq", "cpu_capacity"] {
        let (Some(f), Some(s)) = (per_cpu(sysfs, fast, file)?, per_cpu(sysfs, slow, file)?) else {
            skipped.push(format!("no {file}"));
            continue;
        };
        let ratio = mean(&f) / mean(&s);
        if ratio > 1.0 {
            return Ok((ratio, format!("from {file}")));
        }
        skipped.push(format!("{file} not higher on P-cores"));
    }
    Ok((
        HYBRID_DEFAULT_SF,
        format!("assumed ({})", skipped.join(", ")),
    ))
}

/// `devices/system/cpu/cpuN/<file>` of each CPU as a number; `None` if it is missing for any.
fn per_cpu(sysfs: &Sysfs, cpus: &[usize], file: &str) -> Result<Option<Vec<u64>>, ClassError> {
    let mut out = Vec::with_capacity(cpus.len());
    for &c in cpus {
        let value = match sysfs.cpu_number(c, file) {
            Err(colosched_sys::Error::Io { .. }) => return Ok(None),
            r => r.map_err(read_error)?,
        };
        if value == 0 {
            let path = sysfs.cpu_file(c, file).display().to_string();
            return Err(error(path, "0 is not a speed"));
        }
        out.push(value);
    }
    Ok(Some(out))
}

/// A sysfs file that does not read as it should: the error names it.
fn read_error(e: colosched_sys::Error) -> ClassError {
    error(e.path().display().to_string(), e.msg())
}

fn distinct(values: &[u64]) -> Vec<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

fn mean(values: &[u64]) -> f64 {
    values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64
}

fn join(values: &[u64]) -> String {
    let words: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    words.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// A fake sysfs under a tempdir.
    struct Sys {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    impl Sys {
        fn new() -> Sys {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("sys");
            fs::create_dir_all(root.join("devices/system/cpu")).unwrap();
            Sys { _dir: dir, root }
        }

        fn put(&self, rel: &str, text: &str) {
            let path = self.root.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, format!("{text}\n")).unwrap();
        }

        fn cpu(&self, cpu: usize, file: &str, value: u64) {
            self.put(
                &format!("devices/system/cpu/cpu{cpu}/{file}"),
                &value.to_string(),
            );
        }
    }

    const FREQ: &str = "cpufreq/cpuinfo_max_freq";

    fn map(fast: &[usize], slow: &[usize], sf_fast: f64) -> ClassMap {
        ClassMap {
            fast: fast.to_vec(),
            slow: slow.to_vec(),
            sf_fast,
        }
    }

    #[test]
    fn the_map_overrides_sysfs() {
        // sysfs says hybrid with other classes; the map wins.
        let sys = Sys::new();
        sys.put("devices/cpu_core/cpus", "1");
        sys.put("devices/cpu_atom/cpus", "0");
        let c = read_classes(&sys.root, &[1, 0], Some(&map(&[0], &[1], 1.5))).unwrap();
        assert_eq!(c.cpus, vec![0, 1]);
        assert_eq!(c.platform.sf, vec![1.5, 1.0]);
        assert_eq!(c.cpus_of(CoreClass::Fast), vec![0]);
        assert_eq!(c.cpus_of(CoreClass::Slow), vec![1]);
        assert!(!c.single_class());
        assert_eq!(c.source, "class map: fast 0 (SF 1.5), slow 1");
    }

    #[test]
    fn map_errors_name_the_key_and_the_cpu() {
        let sys = Sys::new();
        let err = |m: ClassMap| read_classes(&sys.root, &[0, 1], Some(&m)).unwrap_err();
        let e = err(map(&[0], &[1, 2], 1.5));
        assert_eq!(e.place, "class map: `slow`");
        assert_eq!(e.why, "CPU 2 is not usable (usable: 0-1)");
        let e = err(map(&[], &[0, 1], 1.5));
        assert_eq!(
            (e.place.as_str(), e.why.as_str()),
            ("class map: `fast`", "has no CPU")
        );
        assert_eq!(
            err(map(&[0], &[0, 1], 1.5)).why,
            "CPU 0 is in `fast` and `slow`"
        );
        assert_eq!(
            err(map(&[0], &[], 1.5)).to_string(),
            "class map: `slow`: has no CPU"
        );
        let e = read_classes(&sys.root, &[0, 1, 2], Some(&map(&[0], &[1], 1.5))).unwrap_err();
        assert_eq!(e.why, "usable CPU 2 is in neither `fast` nor `slow`");
        for bad in [1.0, 0.5, f64::NAN] {
            assert_eq!(err(map(&[0], &[1], bad)).place, "class map: `sf_fast`");
        }
        // The TOML form, with unknown keys refused.
        let m: ClassMap = toml::from_str("fast = [0]\nslow = [1]\nsf_fast = 1.5").unwrap();
        assert_eq!(m, map(&[0], &[1], 1.5));
        assert!(toml::from_str::<ClassMap>("fast = [0]\nslow = [1]\nsf = 1.5").is_err());
    }

    #[test]
    fn intel_hybrid_with_and_without_frequencies() {
        let sys = Sys::new();
        sys.put("devices/cpu_core/cpus", "0-3");
        sys.put("devices/cpu_atom/cpus", "4-7");
        // No cpufreq, no cpu_capacity: the default ratio, said so.
        let c = read_classes(&sys.root, &[0, 1, 2, 3, 4, 5, 6, 7], None).unwrap();
        assert_eq!(c.cpus_of(CoreClass::Fast), vec![0, 1, 2, 3]);
        assert_eq!(c.platform.sf[0], HYBRID_DEFAULT_SF);
        assert_eq!(c.platform.sf[7], 1.0);
        assert!(c.source.contains("assumed"), "{}", c.source);
        // Max frequencies: P-cores 5.0 and 4.8 GHz (favoured cores), E-cores 3.9: one SF for
        // the class, the means' ratio 4.9 / 3.9.
        for cpu in 0..8 {
            let khz = [5_000_000, 4_800_000][cpu % 2];
            sys.cpu(cpu, FREQ, if cpu < 4 { khz } else { 3_900_000 });
        }
        let c = read_classes(&sys.root, &(0..8).collect::<Vec<_>>(), None).unwrap();
        assert!((c.platform.sf[1] - 4.9 / 3.9).abs() < 1e-12);
        assert_eq!(c.platform.sf[0], c.platform.sf[1]);
        assert_eq!(c.platform.n_fast(), 4, "one SF per class keeps the classes");
        assert!(
            c.source.contains("from cpufreq/cpuinfo_max_freq"),
            "{}",
            c.source
        );
        // Only some CPUs usable: the lists are cut to them.
        let c = read_classes(&sys.root, &[3, 4, 5], None).unwrap();
        assert_eq!(c.cpus_of(CoreClass::Fast), vec![3]);
        assert_eq!(c.cpus_of(CoreClass::Slow), vec![4, 5]);
    }

    #[test]
    fn hybrid_capacity_is_used_when_frequencies_do_not_rank_the_classes() {
        let sys = Sys::new();
        sys.put("devices/cpu_core/cpus", "0-1");
        sys.put("devices/cpu_atom/cpus", "2-3");
        for cpu in 0..4 {
            sys.cpu(cpu, FREQ, 3_000_000); // capped: all alike
            sys.cpu(cpu, "cpu_capacity", if cpu < 2 { 1024 } else { 640 });
        }
        let c = read_classes(&sys.root, &[0, 1, 2, 3], None).unwrap();
        assert!((c.platform.sf[0] - 1.6).abs() < 1e-12);
        assert!(c.source.contains("from cpu_capacity"), "{}", c.source);
    }

    #[test]
    fn hybrid_errors_and_one_class_of_usable_cpus() {
        let sys = Sys::new();
        sys.put("devices/cpu_core/cpus", "0-1");
        sys.put("devices/cpu_atom/cpus", "2-3");
        let e = read_classes(&sys.root, &[0, 4], None).unwrap_err();
        assert!(e.place.ends_with("devices/cpu_atom/cpus"), "{e}");
        assert_eq!(e.why, "usable CPU 4 is in neither list");
        // Usable CPUs all P-cores: one class, said so.
        let c = read_classes(&sys.root, &[0, 1], None).unwrap();
        assert!(c.single_class());
        assert!(c.source.contains("all P-cores"), "{}", c.source);
        assert_eq!(c.platform.sf, vec![1.0, 1.0]);
        // An unparsable list names its file.
        sys.put("devices/cpu_atom/cpus", "2-x");
        let e = read_classes(&sys.root, &[0, 2], None).unwrap_err();
        assert!(e.place.ends_with("devices/cpu_atom/cpus"), "{e}");
        assert!(e.why.contains("bad CPU list"), "{e}");
    }

    #[test]
    fn arm_capacity_gives_sf_over_the_smallest() {
        let sys = Sys::new();
        for (cpu, cap) in [(0, 446), (1, 446), (2, 1024), (3, 1024)] {
            sys.cpu(cpu, "cpu_capacity", cap);
        }
        let c = read_classes(&sys.root, &[0, 1, 2, 3], None).unwrap();
        assert_eq!(c.cpus_of(CoreClass::Fast), vec![2, 3]);
        assert!((c.platform.sf[2] - 1024.0 / 446.0).abs() < 1e-12);
        assert_eq!(c.source, "cpu_capacity: 446 and 1024");
        // A third capacity: IA knows two classes.
        sys.cpu(4, "cpu_capacity", 870);
        let e = read_classes(&sys.root, &[0, 2, 4], None).unwrap_err();
        assert!(
            e.place.ends_with("devices/system/cpu/cpuN/cpu_capacity"),
            "{e}"
        );
        assert!(e.why.contains("3 different values (446, 870, 1024)"), "{e}");
        // Garbage names the file.
        sys.put("devices/system/cpu/cpu1/cpu_capacity", "big");
        let e = read_classes(&sys.root, &[0, 1], None).unwrap_err();
        assert!(e.place.ends_with("cpu1/cpu_capacity"), "{e}");
    }

    #[test]
    fn equal_capacities_fall_through_to_frequencies_then_to_one_class() {
        let sys = Sys::new();
        for cpu in 0..2 {
            sys.cpu(cpu, "cpu_capacity", 1024);
            sys.cpu(cpu, FREQ, [2_700_000, 1_500_000][cpu]);
        }
        let c = read_classes(&sys.root, &[0, 1], None).unwrap();
        assert!((c.platform.sf[0] - 1.8).abs() < 1e-12);
        assert_eq!(c.cpus_of(CoreClass::Fast), vec![0]);
        assert!(
            c.source.starts_with("cpufreq/cpuinfo_max_freq"),
            "{}",
            c.source
        );
        // All alike: one class, and the source says what was looked at.
        sys.cpu(0, FREQ, 1_500_000);
        let c = read_classes(&sys.root, &[0, 1], None).unwrap();
        assert!(c.single_class());
        assert_eq!(
            c.source,
            "one class (no devices/cpu_core and devices/cpu_atom; cpu_capacity 1024 on every \
             CPU; cpufreq/cpuinfo_max_freq 1500000 on every CPU)"
        );
        // A frequency file missing for one CPU: that source is skipped, not half used.
        fs::remove_file(sys.root.join("devices/system/cpu/cpu1").join(FREQ)).unwrap();
        let c = read_classes(&sys.root, &[0, 1], None).unwrap();
        assert!(
            c.source
                .contains("cpufreq/cpuinfo_max_freq missing for a usable CPU"),
            "{}",
            c.source
        );
        assert!(read_classes(&sys.root, &[], None).is_err());
    }

    #[test]
    fn this_machine_is_one_class_without_a_map() {
        // The real /sys: 2 identical CPUs here. Whatever the host, the call must not fail and
        // must say where its answer came from.
        let c = read_classes(Path::new("/sys"), &[0, 1], None).unwrap();
        println!("this machine: {} (SF {:?})", c.source, c.platform.sf);
        assert!(!c.source.is_empty());
        assert_eq!(c.cpus, vec![0, 1]);
    }
}
