//! Balance metrics over per-node loads.

/// Gini coefficient G = Σ_i Σ_j |x_i − x_j| / (2 n² x̄), computed in O(n log n) from the sorted
/// values as Σ_i (2i − n − 1) x_(i) / (n Σx) (i = 1..n). 0 = perfectly even; → 1 = all load on one
/// node. Defined as 0 for an empty slice or a zero total. Negative inputs are not meaningful.
/// `scratch` is reused between calls so a simulator step allocates nothing.
pub fn gini_with(values: &[f64], scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend_from_slice(values);
    scratch.sort_unstable_by(f64::total_cmp);
    gini_sorted(scratch)
}

/// `gini` of values already sorted by `f64::total_cmp` (ascending).
pub fn gini_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len() as f64;
    let total: f64 = sorted.iter().sum();
    if sorted.is_empty() || total <= 0.0 {
        return 0.0;
    }
    let weighted: f64 = sorted
        .iter()
        .enumerate()
        .map(|(i, x)| (2.0 * (i as f64 + 1.0) - n - 1.0) * x)
        .sum();
    weighted / (n * total)
}

pub fn gini(values: &[f64]) -> f64 {
    gini_with(values, &mut Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Rng;

    #[test]
    fn all_equal_is_zero() {
        assert!(gini(&[0.3; 50]).abs() < 1e-12);
        assert_eq!(gini(&[]), 0.0);
        assert_eq!(gini(&[0.0; 4]), 0.0);
    }

    #[test]
    fn uniform_is_about_a_third() {
        let mut rng = Rng::new(42);
        let xs: Vec<f64> = (0..200_000).map(|_| rng.next_f64()).collect();
        assert!((gini(&xs) - 1.0 / 3.0).abs() < 0.005, "{}", gini(&xs));
    }

    #[test]
    fn one_nonzero_among_a_thousand_zeros_is_almost_one() {
        let mut xs = vec![0.0; 1000];
        xs.push(1.0);
        // Exactly 1000/1001 by the pairwise definition.
        assert!((gini(&xs) - 1000.0 / 1001.0).abs() < 1e-12);
    }

    #[test]
    fn matches_the_pairwise_definition() {
        let xs = [0.1, 0.7, 0.2, 0.2, 0.9, 0.0];
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let pairs: f64 = xs
            .iter()
            .flat_map(|a| xs.iter().map(move |b| (a - b).abs()))
            .sum();
        assert!((gini(&xs) - pairs / (2.0 * n * n * mean)).abs() < 1e-12);
    }
}
