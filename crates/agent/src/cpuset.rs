//! `CpuSet`: a set of CPU or node numbers of any size, as one bit per number in 64-bit words
//! (the kernel's own mask layout, which `migrate_pages(2)` takes as is). Masks of 64 bits were
//! not enough: node and CPU numbers above 63 exist.

/// A set of CPU (or NUMA node) numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
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

/// Parses the kernel's CPU list format: `0-3,8,10-11` (whitespace and a trailing newline allowed).
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
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
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The inverse of `parse_cpulist`: `[0,1,2,5]` → `0-2,5`.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The `cpumask` format of /sys/devices/virtual/workqueue/*/cpumask: hex, 32-bit groups, commas.
pub fn cpumask_hex(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
    parts[0] = format!("{:x}", w[words - 1]);
    parts.join(",")
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
    }

    #[test]
    fn hex_masks() {
        assert_eq!(cpumask_hex(&[0, 1, 2, 3]), "f");
        assert_eq!(cpumask_hex(&[4]), "10");
        assert_eq!(cpumask_hex(&[0, 33]), "2,00000001");
    }

    #[test]
    fn cpulist_round_trip() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }
}
