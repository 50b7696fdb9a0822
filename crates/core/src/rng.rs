//! A small deterministic generator (SplitMix64), so a seed gives the same run on every platform
//! and every version of every dependency.

#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in 0..n (n > 0), by Lemire's multiply-shift (bias < n / 2^64).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// The SplitMix64 finaliser: a good 64-bit hash of one word.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A factor of mean 1 and coefficient of variation `cv`, lognormal (always positive):
/// exp(σZ − σ²/2) with σ² = ln(1 + cv²) and Z standard normal by Box–Muller from two uniforms,
/// `u1` in (0, 1] and `u2` in [0, 1), which `uniforms` draws (in that order). Exactly 1 when
/// `cv` is 0, and then `uniforms` is not called, so nothing is drawn.
///
/// The caller draws the uniforms because the simulators draw them differently (the host's
/// `u1` is `1 − x`, the VM simulator's `max(x, 1e-300)`) and a seed's results depend on exactly
/// which numbers are drawn.
pub fn lognormal(cv: f64, uniforms: impl FnOnce() -> (f64, f64)) -> f64 {
    if cv <= 0.0 {
        return 1.0;
    }
    let sigma2 = (1.0 + cv * cv).ln();
    let (u1, u2) = uniforms();
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    (sigma2.sqrt() * z - sigma2 / 2.0).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_uniform_enough() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut r = Rng::new(1);
        let mean = (0..100_000).map(|_| r.next_f64()).sum::<f64>() / 100_000.0;
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
        let mut counts = [0u32; 4];
        (0..40_000).for_each(|_| counts[r.below(4)] += 1);
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn lognormal_factors_have_mean_one_and_the_asked_spread() {
        let mut rng = Rng::new(3);
        let mut drawn = false;
        assert_eq!(
            lognormal(0.0, || {
                drawn = true;
                (0.5, 0.5)
            }),
            1.0
        );
        assert!(!drawn, "a cv of 0 draws nothing");
        for cv in [0.1, 0.5] {
            let xs: Vec<f64> = (0..200_000)
                .map(|_| lognormal(cv, || (1.0 - rng.next_f64(), rng.next_f64())))
                .collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
            assert!((mean - 1.0).abs() < 0.01, "cv {cv}: mean {mean}");
            assert!((sd / cv - 1.0).abs() < 0.05, "cv {cv}: sd {sd}");
            assert!(xs.iter().all(|&x| x > 0.0));
        }
    }
}
