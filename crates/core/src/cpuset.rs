//! `CpuSet`: a set of CPU or node numbers of any size, as one bit per number in 64-bit words
//! (the kernel's own mask layout, which `migrate_pages(2)` takes as is). Masks of 64 bits were
//! not enough: node and CPU numbers above 63 exist.

use std::fmt;
use std::str::FromStr;

/// A set of CPU (or NUMA node) numbers. Its text form is the kernel's CPU list (`0-3,8`), which
/// is also how the state file stores it. (No word past the highest number is kept, so equal sets
/// have equal words, and the derived order is a total order of sets.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// The numbers in `cpus` (in any order, repeats allowed): `[0, 1, 2, 5]` → `0-2,5`.
    pub fn from_slice(cpus: &[usize]) -> CpuSet {
        cpus.iter().copied().collect()
    }

    /// Every number from 0 to `n - 1`.
    pub fn all(n: usize) -> CpuSet {
        (0..n).collect()
    }

    pub fn insert(&mut self, n: usize) {
        let w = n / 64;
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (n % 64);
    }

    pub fn contains(&self, n: usize) -> bool {
        self.words
            .get(n / 64)
            .is_some_and(|w| w & (1 << (n % 64)) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The numbers in the set, in order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    i * 64 + bit
                })
            })
        })
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The lowest number in the set.
    pub fn first(&self) -> Option<usize> {
        self.iter().next()
    }

    /// Every number of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        let theirs = |i: usize| other.words.get(i).copied().unwrap_or(0);
        self.words
            .iter()
            .enumerate()
            .all(|(i, &w)| w & !theirs(i) == 0)
    }

    /// Some number is in both.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// The numbers of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        self.iter().filter(|&n| !other.contains(n)).collect()
    }

    /// The 64-bit words, lowest numbers first: the layout of the kernel's `unsigned long` masks.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

impl FromIterator<usize> for CpuSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> CpuSet {
        let mut s = CpuSet::default();
        for n in iter {
            s.insert(n);
        }
        s
    }
}

impl FromStr for CpuSet {
    type Err = String;

    /// The kernel's CPU list format: `0-3,8,10-11` (whitespace and a trailing newline allowed).
    fn from_str(text: &str) -> Result<CpuSet, String> {
        let mut set = CpuSet::default();
        for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
            let part = part.trim();
            let num = |s: &str| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| format!("bad CPU list {:?}", text.trim()))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b || b >= 4096 {
                        return Err(format!("bad CPU range {part:?}"));
                    }
                    (a..=b).for_each(|n| set.insert(n));
                }
                None => set.insert(num(part)?),
            }
        }
        Ok(set)
    }
}

impl fmt::Display for CpuSet {
    /// The CPU list: `{0, 1, 2, 5}` → `0-2,5`.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut it = self.iter().peekable();
        let mut first = true;
        while let Some(a) = it.next() {
            let mut b = a;
            while it.peek() == Some(&(b + 1)) {
                b = it.next().unwrap_or(b);
            }
            let sep = if first { "" } else { "," };
            first = false;
            if a == b {
                write!(f, "{sep}{a}")?;
            } else {
                write!(f, "{sep}{a}-{b}")?;
            }
        }
        Ok(())
    }
}

impl serde::Serialize for CpuSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for CpuSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CpuSet, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The `cpumask` format of /sys/devices/virtual/workqueue/*/cpumask: hex, 32-bit groups, commas.
pub fn cpumask_hex(cpus: &CpuSet) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for c in cpus.iter() {
        w[c / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
    parts[0] = format!("{:x}", w[words - 1]);
    parts.join(",")
}

/// A set from a CPU list known to be valid (tests' literals); panics on a bad one.
pub fn set(text: &str) -> CpuSet {
    text.parse().unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_past_63_and_the_kernels_word_layout() {
        let s: CpuSet = [0, 63, 64, 130].into_iter().collect();
        assert!(s.contains(64) && s.contains(130) && !s.contains(65) && !s.contains(1000));
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 63, 64, 130]);
        assert_eq!(s.words(), [1 | 1 << 63, 1, 1 << 2]);
        assert!(CpuSet::default().is_empty() && !s.is_empty());
        assert_eq!(CpuSet::all(3).iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(CpuSet::from_slice(&[5, 0, 2, 1, 2]).to_string(), "0-2,5");
    }

    #[test]
    fn hex_masks() {
        assert_eq!(cpumask_hex(&set("0-3")), "f");
        assert_eq!(cpumask_hex(&set("4")), "10");
        assert_eq!(cpumask_hex(&set("0,33")), "2,00000001");
    }

    #[test]
    fn cpulist_round_trip_and_set_operations() {
        let s = set("0-3,8,10-11\n");
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(
            (s.to_string(), s.len(), s.first()),
            ("0-3,8,10-11".into(), 7, Some(0))
        );
        assert_eq!(set("\n"), CpuSet::default());
        assert_eq!(set("5,1-2,2").to_string(), "1-2,5");
        assert!("3-1".parse::<CpuSet>().is_err() && "a".parse::<CpuSet>().is_err());
        assert!(set("1-2").is_subset(&s) && !set("4").is_subset(&s) && !set("100").is_subset(&s));
        assert!(set("3,70").intersects(&s) && !set("4-7").intersects(&s));
        assert_eq!(s.difference(&set("1-10")).to_string(), "0,11");
        let json = serde_json::to_string(&set("0-1,70")).unwrap();
        assert_eq!(json, "\"0-1,70\"");
        assert_eq!(
            serde_json::from_str::<CpuSet>(&json).unwrap(),
            set("0-1,70")
        );
        assert!(serde_json::from_str::<CpuSet>("\"x\"").is_err());
    }
}
