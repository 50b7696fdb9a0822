//! The seeded usage model: static per-task draws through a Gaussian copula, times a temporal
//! factor per window (see the module documentation and docs/usage-model.md).
use super::params::{cholesky4, TemporalParams, UsageParams};
use super::rng::{
    draw, splitmix64, Normals, S_ANCHOR, S_JOB, S_JOB_KEY, S_TASK, S_TASK_KEY, S_WHITE,
};
use super::Usage;
use crate::error::Result;

/// Most points a quantile table may have.
pub const MAX_GRID: usize = 32;

/// A quantile table on the z grid, padded to a fixed size so lookups need no bounds checks.
#[derive(Clone, Debug)]
struct Table {
    values: [f64; MAX_GRID + 1],
    /// `n - 1` as f64: the last grid position.
    last: f64,
}

impl Table {
    fn new(values: &[f64]) -> Table {
        let mut padded = [values[values.len() - 1]; MAX_GRID + 1];
        padded[..values.len()].copy_from_slice(values);
        Table {
            values: padded,
            last: (values.len() - 1) as f64,
        }
    }

    /// Linear interpolation at grid position `pos` (clamped to the table).
    #[inline(always)]
    fn at(&self, pos: f64) -> f64 {
        // max/min (not clamp): a NaN position reads as 0 instead of propagating.
        let p = pos.max(0.0).min(self.last);
        // p <= last < MAX_GRID, so the mask changes nothing but lets the compiler drop checks.
        let i = (p as i64 as usize) & (MAX_GRID - 1);
        let f = p - i as i64 as f64;
        let (a, b) = (self.values[i], self.values[i + 1]);
        a + f * (b - a)
    }
}

/// The temporal noise of CPU and memory: shared anchors and phases, per-resource amplitudes.
#[derive(Clone, Debug)]
struct TemporalModel {
    /// sqrt of the white-noise share, [cpu, mem].
    white: [f64; 2],
    /// Per octave: spacing, 1 / spacing, sqrt of the shares [cpu, mem].
    octaves: Vec<(f64, f64, [f64; 2])>,
}

impl TemporalModel {
    fn new(p: &TemporalParams) -> TemporalModel {
        let white = |f: &[f64]| (1.0 - f.iter().sum::<f64>()).max(0.0).sqrt();
        TemporalModel {
            white: [white(&p.cpu.fractions), white(&p.mem.fractions)],
            octaves: (0..p.spacings.len())
                .map(|o| {
                    let k = p.spacings[o];
                    let amps = [p.cpu.fractions[o].sqrt(), p.mem.fractions[o].sqrt()];
                    (k, 1.0 / k, amps)
                })
                .collect(),
        }
    }

    /// The unit-variance stationary noise `z(w)` of one task (`key`) for resource `r` (0: CPU,
    /// 1: memory). The two use different bits of the same draws, so they are independent.
    #[inline(always)]
    fn z(&self, normals: Normals, key: u64, window: u32, r: usize) -> f64 {
        let h = draw(key, S_WHITE, window as u64);
        let mut z = self.white[r] * normals.at(h, r as u32);
        for (o, &(spacing, inv, amps)) in self.octaves.iter().enumerate() {
            // The phase: 16 bits of the task key per octave.
            let phase = ((key >> (16 * o)) & 0xFFFF) as i64 as f64 * (1.0 / 65536.0) * spacing;
            // x >= 0, so truncation is floor (and avoids a libm call on baseline x86-64).
            let x = (window as f64 + phase) * inv;
            let i = x as i64;
            let t = x - i as f64;
            let ha = draw(key, S_ANCHOR + o as u64, i as u64);
            let hb = draw(key, S_ANCHOR + o as u64, i as u64 + 1);
            let (a, b) = (normals.at(ha, r as u32), normals.at(hb, r as u32));
            // Linear interpolation rescaled to unit variance.
            let norm = 1.0 / ((1.0 - t) * (1.0 - t) + t * t).sqrt();
            z += amps[r] * norm * (a + t * (b - a));
        }
        z
    }
}

/// `e^x` for |x| < 700 to ~1e-7 relative error, without a libm call: `2^n * 2^f`, `n` rounded
/// with the 1.5 * 2^52 trick, `2^f` (|f| <= 1/2) by a degree-7 Taylor polynomial.
#[inline(always)]
fn fast_exp(x: f64) -> f64 {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let y = x.clamp(-700.0, 700.0) * std::f64::consts::LOG2_E;
    let n = (y + ROUND) - ROUND;
    let f = (y - n) * std::f64::consts::LN_2;
    let p = 1.0
        + f * (1.0
            + f * (1.0 / 2.0
                + f * (1.0 / 6.0
                    + f * (1.0 / 24.0
                        + f * (1.0 / 120.0 + f * (1.0 / 720.0 + f * (1.0 / 5040.0)))))));
    p * f64::from_bits(((n as i64 + 1023) as u64) << 52)
}

/// Per-task draws that do not depend on the window.
#[derive(Clone, Copy, Debug)]
struct TaskDraw {
    key: u64,
    /// Copula normal scores of (cpu_ratio, max_mean, mem_ratio, mai).
    y: [f64; 4],
    sigma_cpu: f64,
    sigma_mem: f64,
}

/// A task's levels in the model (`UsageModel::levels`): its CPU part, its mean memory before the
/// window's variation and that variation's spread, its peak-to-mean CPU ratio and its memory
/// accesses per instruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskLevels {
    cpu: CpuLevels,
    mem_level: f64,
    max_mean: f64,
    mai: f32,
    sigma_mem: f64,
}

impl TaskLevels {
    /// What `UsageModel::cpu_at` reads: a replay keeps it where it reads every task each window.
    pub fn cpu(&self) -> CpuLevels {
        self.cpu
    }
}

/// The part of a task's levels that its CPU in a window depends on (24 bytes): its key for the
/// window's draws, its mean CPU before the window's variation and the spread of that variation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuLevels {
    key: u64,
    cpu_level: f64,
    sigma_cpu: f64,
}

/// The seeded usage model. Cheap to clone; `usage` takes `&self` and keeps no state.
#[derive(Clone, Debug)]
pub struct UsageModel {
    params: UsageParams,
    seed_key: u64,
    seed: u64,
    z_min: f64,
    inv_step: f64,
    cpu_ratio: Table,
    max_mean: Table,
    mem_ratio: Table,
    mai: Table,
    cpu_abs: Table,
    mem_abs: Table,
    chol: [[f64; 4]; 4],
    job_amp: [f64; 4],
    task_amp: [f64; 4],
    sigma_cpu: Table,
    sigma_mem: Table,
    temporal: TemporalModel,
    normals: Normals,
}

impl UsageModel {
    /// The model with the bundled, calibrated parameters.
    pub fn calibrated(seed: u64) -> UsageModel {
        UsageModel::with_params(UsageParams::bundled(), seed).expect("bundled parameters are valid")
    }

    /// The model with custom parameters (validated).
    pub fn with_params(params: UsageParams, seed: u64) -> Result<UsageModel> {
        params.validate()?;
        let chol = cholesky4(&params.copula.corr).expect("validated");
        let icc = &params.copula.job_icc;
        let table = |t: &Vec<f64>| Table::new(t);
        Ok(UsageModel {
            seed_key: splitmix64(seed ^ 0x0005_EEDC_0105_C4ED),
            seed,
            z_min: params.z_grid.min,
            inv_step: 1.0 / params.z_grid.step,
            cpu_ratio: table(&params.cpu_ratio),
            max_mean: table(&params.max_mean),
            mem_ratio: table(&params.mem_ratio),
            mai: table(&params.mai),
            cpu_abs: table(&params.cpu_abs),
            mem_abs: table(&params.mem_abs),
            chol,
            job_amp: [0, 1, 2, 3].map(|i| icc[i].sqrt()),
            task_amp: [0, 1, 2, 3].map(|i| (1.0 - icc[i]).sqrt()),
            sigma_cpu: Table::new(&params.temporal.cpu.sigma),
            sigma_mem: Table::new(&params.temporal.mem.sigma),
            temporal: TemporalModel::new(&params.temporal),
            normals: Normals::get_table(),
            params,
        })
    }

    pub fn params(&self) -> &UsageParams {
        &self.params
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    #[inline(always)]
    fn pos(&self, z: f64) -> f64 {
        (z - self.z_min) * self.inv_step
    }

    #[inline(always)]
    fn task_draw(&self, job: u64, index: u32) -> TaskDraw {
        let job_key = draw(self.seed_key, S_JOB_KEY, job);
        let key = draw(job_key, S_TASK_KEY, index as u64);
        let (hj, ht) = (draw(job_key, S_JOB, 0), draw(key, S_TASK, 0));
        let n = self.normals;
        let ej = [n.at(hj, 0), n.at(hj, 1), n.at(hj, 2), n.at(hj, 3)];
        let et = [n.at(ht, 0), n.at(ht, 1), n.at(ht, 2), n.at(ht, 3)];
        let l = &self.chol;
        let mut y = [0.0; 4];
        for i in 0..4 {
            let (mut nj, mut nt) = (0.0, 0.0);
            for k in 0..=i {
                nj += l[i][k] * ej[k];
                nt += l[i][k] * et[k];
            }
            y[i] = self.job_amp[i] * nj + self.task_amp[i] * nt;
        }
        TaskDraw {
            key,
            y,
            sigma_cpu: self.sigma_cpu.at(self.pos(n.at(ht, 4))),
            sigma_mem: self.sigma_mem.at(self.pos(n.at(ht, 5))),
        }
    }

    /// Usage of task (job, index) in window `window` (absolute, since the trace window start).
    ///
    /// Pure in (seed, job, index, requests, window); no allocation. A CPU (memory) request that is
    /// zero, negative or NaN makes the task draw its absolute level from `cpu_abs` (`mem_abs`)
    /// instead of `request x ratio`. Results are clamped: `0 <= cpu <= max_cpu <= 1`, `mem <= 1`.
    pub fn usage(
        &self,
        job: u64,
        index: u32,
        cpu_request: f32,
        mem_request: f32,
        window: u32,
    ) -> Usage {
        self.usage_at(&self.levels(job, index, cpu_request, mem_request), window)
    }

    /// What `usage` draws once per task, whatever the window: a replay keeps it for each running
    /// task, so that a new window costs only the window's part (`usage_at`).
    pub fn levels(&self, job: u64, index: u32, cpu_request: f32, mem_request: f32) -> TaskLevels {
        let d = self.task_draw(job, index);
        let cpu_level = if cpu_request > 0.0 && cpu_request.is_finite() {
            self.cpu_ratio.at(self.pos(d.y[0])) * cpu_request as f64
        } else {
            self.cpu_abs.at(self.pos(d.y[0]))
        };
        let mem_level = if mem_request > 0.0 && mem_request.is_finite() {
            self.mem_ratio.at(self.pos(d.y[2])) * mem_request as f64
        } else {
            self.mem_abs.at(self.pos(d.y[2]))
        };
        TaskLevels {
            cpu: CpuLevels {
                key: d.key,
                cpu_level,
                sigma_cpu: d.sigma_cpu,
            },
            mem_level,
            max_mean: self.max_mean.at(self.pos(d.y[1])),
            mai: self.mai.at(self.pos(d.y[3])) as f32,
            sigma_mem: d.sigma_mem,
        }
    }

    /// `usage` of the task whose `levels` these are, in `window`.
    pub fn usage_at(&self, l: &TaskLevels, window: u32) -> Usage {
        let cpu = self.cpu_level_at(&l.cpu, window);
        let max_cpu = (cpu * l.max_mean).clamp(cpu, 1.0);
        let sm = l.sigma_mem;
        let zm = self.temporal.z(self.normals, l.cpu.key, window, 1);
        let fm = fast_exp(sm * zm - 0.5 * sm * sm);
        Usage {
            cpu: cpu as f32,
            max_cpu: max_cpu as f32,
            mem: (l.mem_level * fm).clamp(0.0, 1.0) as f32,
            mai: l.mai,
        }
    }

    /// `usage_at(l, window).cpu` alone, for less than half the work: a replay needs a task's
    /// other fields only when a planner looks at the task.
    #[inline]
    pub fn cpu_at(&self, l: &CpuLevels, window: u32) -> f32 {
        self.cpu_level_at(l, window) as f32
    }

    #[inline(always)]
    fn cpu_level_at(&self, l: &CpuLevels, window: u32) -> f64 {
        let sc = l.sigma_cpu;
        let zc = self.temporal.z(self.normals, l.key, window, 0);
        let fc = fast_exp(sc * zc - 0.5 * sc * sc);
        (l.cpu_level * fc).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_fast_exp_is_accurate() {
        for i in -4000..=4000 {
            let x = i as f64 * 0.01;
            let rel = fast_exp(x) / x.exp() - 1.0;
            assert!(rel.abs() < 2e-7, "exp({x}): relative error {rel}");
        }
        assert!(fast_exp(1e6).is_finite() && fast_exp(-1e6) >= 0.0);
    }

    #[test]
    fn usage_model_is_deterministic_and_seeded() {
        let a = UsageModel::calibrated(7);
        let b = UsageModel::calibrated(7);
        let c = UsageModel::calibrated(8);
        let mut differ = 0;
        for job in 0..200u64 {
            for w in [0, 1, 17, 5000] {
                let x = a.usage(job, 3, 0.0625, 0.03, w);
                assert_eq!(x, b.usage(job, 3, 0.0625, 0.03, w));
                assert_eq!(x, a.usage(job, 3, 0.0625, 0.03, w));
                if x != c.usage(job, 3, 0.0625, 0.03, w) {
                    differ += 1;
                }
            }
        }
        assert!(
            differ > 780,
            "a different seed changes almost every value ({differ}/800)"
        );
        // Different tasks and windows differ too.
        assert_ne!(a.usage(1, 0, 0.1, 0.1, 0), a.usage(1, 1, 0.1, 0.1, 0));
        assert_ne!(
            a.usage(1, 0, 0.1, 0.1, 0).cpu,
            a.usage(1, 0, 0.1, 0.1, 1).cpu
        );
    }

    #[test]
    fn usage_model_respects_bounds_and_zero_requests() {
        let m = UsageModel::calibrated(1);
        let mut zero_cpu = Vec::new();
        for job in 0..5000u64 {
            for (req, w) in [(1.0, 0), (0.5, 3), (0.0, 9), (f32::NAN, 2), (-1.0, 1)] {
                let u = m.usage(job, 0, req, req, w);
                assert!(u.cpu >= 0.0 && u.cpu <= 1.0, "{u:?}");
                assert!(u.max_cpu >= u.cpu && u.max_cpu <= 1.0, "{u:?}");
                assert!(u.mem >= 0.0 && u.mem <= 1.0 && u.mai >= 0.0, "{u:?}");
                if req == 0.0 {
                    zero_cpu.push(u.cpu as f64);
                }
            }
        }
        // A zero request draws an absolute level: median near the real median mean CPU.
        let med = median(&mut zero_cpu);
        let table_med = m.params().cpu_abs[m.params().z_grid.n / 2];
        assert!(
            med > 0.0 && (med / table_med - 1.0).abs() < 0.2,
            "{med} vs {table_med}"
        );
    }

    fn median(v: &mut [f64]) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Fraction of `values` at or below `x`.
    fn cdf(values: &[f64], x: f64) -> f64 {
        values.iter().filter(|v| **v <= x).count() as f64 / values.len() as f64
    }

    #[test]
    fn usage_model_static_draws_match_the_tables() {
        let m = UsageModel::calibrated(42);
        let p = m.params();
        let n = p.z_grid.n;
        let (mut cpu, mut mm, mut mem, mut mai) = (vec![], vec![], vec![], vec![]);
        for job in 0..40_000u64 {
            let d = m.task_draw(job, 0);
            cpu.push(m.cpu_ratio.at(m.pos(d.y[0])));
            mm.push(m.max_mean.at(m.pos(d.y[1])));
            mem.push(m.mem_ratio.at(m.pos(d.y[2])));
            mai.push(m.mai.at(m.pos(d.y[3])));
        }
        // Quantiles at z = -1, 0, +1 (grid entries n/2 -+ 4 with step 0.25).
        for (name, values, table) in [
            ("cpu", &cpu, &p.cpu_ratio),
            ("max_mean", &mm, &p.max_mean),
            ("mem", &mem, &p.mem_ratio),
            ("mai", &mai, &p.mai),
        ] {
            for (k, prob) in [(n / 2 - 4, 0.158_655), (n / 2, 0.5), (n / 2 + 4, 0.841_345)] {
                let got = cdf(values, table[k]);
                eprintln!("{name}: P(X <= q{prob:.3}) = {got:.4}");
                assert!(
                    (got - prob).abs() < 0.025,
                    "{name}: P(X <= q{prob}) = {got}"
                );
            }
        }
        // The public function: median of cpu / request within 10 % of the fitted median.
        let mut ratios: Vec<f64> = (0..20_000u64)
            .map(|job| m.usage(job, 0, 0.01, 0.01, 0).cpu as f64 / 0.01)
            .collect();
        let med = median(&mut ratios);
        let fitted = p.cpu_ratio[n / 2];
        assert!(
            (med / fitted - 1.0).abs() < 0.1,
            "median cpu/request {med} vs fitted {fitted}"
        );
        // Copula: cpu ratio and max/mean are negatively rank-correlated as in the data.
        let rho = spearman(&cpu, &mm);
        eprintln!(
            "median cpu/request {med:.4} (fitted {fitted:.4}), spearman cpu~max_mean {rho:.3}"
        );
        let target = p.copula.corr[0][1];
        assert!(
            (rho - target).abs() < 0.06,
            "spearman {rho} vs normal-score corr {target}"
        );
    }

    fn ranks(v: &[f64]) -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
                j += 1;
            }
            for k in i..=j {
                r[idx[k]] = (i + j) as f64 / 2.0;
            }
            i = j + 1;
        }
        r
    }

    fn pearson(a: &[f64], b: &[f64]) -> f64 {
        let n = a.len() as f64;
        let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
        let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
        let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
        let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
        cov / (va * vb).sqrt()
    }

    fn spearman(a: &[f64], b: &[f64]) -> f64 {
        pearson(&ranks(a), &ranks(b))
    }

    #[test]
    fn usage_model_tasks_of_a_job_look_alike() {
        let m = UsageModel::calibrated(3);
        let (mut a, mut b, mut other) = (vec![], vec![], vec![]);
        for job in 0..5000u64 {
            a.push(m.task_draw(job, 0).y[0]);
            b.push(m.task_draw(job, 1).y[0]);
            other.push(m.task_draw(job + 1_000_000, 0).y[0]);
        }
        let icc = m.params().copula.job_icc[0];
        let same_job = pearson(&a, &b);
        assert!(
            (same_job - icc).abs() < 0.03,
            "same-job correlation {same_job} vs icc {icc}"
        );
        assert!(pearson(&a, &other).abs() < 0.05);
    }

    /// Pooled sd and autocorrelation of log series with each series' mean removed (the estimator
    /// of scripts/calibrate_usage.py).
    fn pooled_stats(series: &[Vec<f64>], lags: &[usize]) -> (f64, Vec<f64>) {
        let devs: Vec<Vec<f64>> = series
            .iter()
            .map(|s| {
                let mean = s.iter().sum::<f64>() / s.len() as f64;
                s.iter().map(|x| x - mean).collect()
            })
            .collect();
        let autocov = |lag: usize| {
            let (mut sum, mut n) = (0.0, 0usize);
            for d in &devs {
                for t in 0..d.len() - lag {
                    sum += d[t] * d[t + lag];
                    n += 1;
                }
            }
            sum / n as f64
        };
        let g0 = autocov(0);
        (g0.sqrt(), lags.iter().map(|&l| autocov(l) / g0).collect())
    }

    #[test]
    fn usage_model_temporal_variation_matches_the_fit() {
        let m = UsageModel::calibrated(11);
        let (mut cpu, mut mem) = (vec![], vec![]);
        for job in 0..5000u64 {
            // Small requests: no clamping at 1.
            let s: Vec<Usage> = (0..288)
                .map(|w| m.usage(job, 5, 0.001, 0.001, 1000 + w))
                .collect();
            if s.iter().all(|u| u.cpu > 0.0) {
                cpu.push(s.iter().map(|u| (u.cpu as f64).ln()).collect());
            }
            if s.iter().all(|u| u.mem > 0.0) {
                mem.push(s.iter().map(|u| (u.mem as f64).ln()).collect());
            }
            // MAI and max/mean do not vary in time.
            assert!(s.iter().all(|u| u.mai == s[0].mai));
        }
        assert!(
            cpu.len() > 4900 && mem.len() > 4900,
            "{} {}",
            cpu.len(),
            mem.len()
        );
        for (name, series, t) in [
            ("cpu", &cpu, &m.params().temporal.cpu),
            ("mem", &mem, &m.params().temporal.mem),
        ] {
            let (sd, acf) = pooled_stats(series, &[1, 12, 24]);
            let fit = &t.fit;
            eprintln!(
                "{name}: sd {sd:.4} (fit {:.4}), acf 1/12/24 {:.3}/{:.3}/{:.3} (fit {:.3}/{:.3}/{:.3})",
                fit.target_sd, acf[0], acf[1], acf[2], fit.target_acf[1], fit.model_acf[12], fit.model_acf[24]
            );
            assert!(
                (sd / fit.target_sd - 1.0).abs() < 0.1,
                "{name}: sd {sd} vs fitted {}",
                fit.target_sd
            );
            assert!(
                (acf[0] - fit.target_acf[1]).abs() < 0.03,
                "{name}: lag-1 {} vs {}",
                acf[0],
                fit.target_acf[1]
            );
            assert!(
                (acf[1] - fit.model_acf[12]).abs() < 0.05,
                "{name}: lag-12 {} vs {}",
                acf[1],
                fit.model_acf[12]
            );
            assert!(
                (acf[2] - fit.model_acf[24]).abs() < 0.06,
                "{name}: lag-24 {} vs {}",
                acf[2],
                fit.model_acf[24]
            );
        }
    }

    #[test]
    fn usage_model_temporal_factor_keeps_the_mean() {
        let m = UsageModel::calibrated(5);
        let (mut sum, mut n) = (0.0, 0);
        for job in 0..400u64 {
            let level = m.usage(job, 0, 0.001, 0.001, 0).cpu as f64;
            let d = m.task_draw(job, 0);
            let base = m.cpu_ratio.at(m.pos(d.y[0])) * 0.001f32 as f64;
            if base <= 0.0 || level <= 0.0 {
                continue;
            }
            for w in 0..2000 {
                sum += m.usage(job, 0, 0.001, 0.001, w).cpu as f64 / base;
                n += 1;
            }
        }
        let mean = sum / n as f64;
        assert!((mean - 1.0).abs() < 0.05, "mean temporal factor {mean}");
    }
    /// `cargo test --release -p colosched-trace usage_model_timing -- --ignored --nocapture`
    #[test]
    #[ignore = "timing, not a test: cargo test --release -p colosched-trace usage_model_timing -- --ignored --nocapture"]
    fn usage_model_timing() {
        let m = UsageModel::calibrated(1);
        // Minimum over batches: other processes on the machine only ever add time.
        let time = |name: &str, f: &dyn Fn(u32) -> f64| {
            let (batch, mut best, mut acc) = (20_000u32, f64::MAX, 0.0);
            for rep in 0..250u32 {
                let t = std::time::Instant::now();
                for i in 0..batch {
                    acc += f(rep * batch + i);
                }
                best = best.min(t.elapsed().as_nanos() as f64 / batch as f64);
            }
            eprintln!("{name}: {best:.1} ns/call (checksum {acc})");
        };
        time("usage()", &|i| {
            let u = m.usage((i % 50_000) as u64, i % 7, 0.05, 0.04, i / 50_000);
            (u.cpu + u.mem) as f64
        });
    }
}
