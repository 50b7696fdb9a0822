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
}
