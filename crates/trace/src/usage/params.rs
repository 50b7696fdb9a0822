//! The calibrated parameters of the usage model (`usage_params.json`) and their validation.
use std::sync::OnceLock;

use serde::Deserialize;

use super::MAX_GRID;
use crate::error::{Result, TraceError};

/// The calibrated parameters (`usage_params.json`). Tables are quantiles of the real data on a
/// uniform grid of standard-normal scores (`z_grid`): entry `i` is the quantile at probability
/// `Phi(min + i * step)`. Fields of the JSON not listed here (fit diagnostics) are ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct UsageParams {
    pub format: u32,
    /// Input files, their SHA-256, the CC-BY attribution and the source note of the series.
    pub provenance: serde_json::Value,
    pub z_grid: ZGrid,
    /// Mean CPU rate / CPU request.
    pub cpu_ratio: Vec<f64>,
    /// Max CPU rate / mean CPU rate (>= 1).
    pub max_mean: Vec<f64>,
    /// Assigned memory / memory request.
    pub mem_ratio: Vec<f64>,
    /// Memory accesses per instruction.
    pub mai: Vec<f64>,
    /// Mean CPU rate, for tasks whose CPU request is zero or missing.
    pub cpu_abs: Vec<f64>,
    /// Assigned memory, for tasks whose memory request is zero or missing.
    pub mem_abs: Vec<f64>,
    pub copula: Copula,
    pub temporal: TemporalParams,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ZGrid {
    pub min: f64,
    pub step: f64,
    pub n: usize,
}

/// Gaussian copula of the static variables.
#[derive(Clone, Debug, Deserialize)]
pub struct Copula {
    /// Must be `["cpu_ratio", "max_mean", "mem_ratio", "mai"]`.
    pub vars: Vec<String>,
    /// Correlation of the normal scores (4 x 4, positive definite).
    pub corr: Vec<Vec<f64>>,
    /// Share of each normal score's variance that is common to all tasks of a job.
    pub job_icc: Vec<f64>,
}

/// Window-to-window variation: `z(w) = sum_o sqrt(f_o) S_o(w) + sqrt(1 - sum_o f_o) F(w)`, where
/// `S_o` is value noise with anchors every `spacings[o]` windows and `F` white noise.
#[derive(Clone, Debug, Deserialize)]
pub struct TemporalParams {
    /// Anchor spacing of each octave, in windows (shared by CPU and memory).
    pub spacings: Vec<f64>,
    pub cpu: SeriesParams,
    pub mem: SeriesParams,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SeriesParams {
    /// Per-task sd of log usage around the task's level (process sd), on the z grid.
    pub sigma: Vec<f64>,
    /// Share of the variance of `z(w)` of each octave; the rest is white noise.
    pub fractions: Vec<f64>,
    pub fit: TemporalFit,
}

/// What the temporal fit aimed at: statistics of 288-window series with their own mean removed.
#[derive(Clone, Debug, Deserialize)]
pub struct TemporalFit {
    /// Pooled sd of log deviations.
    pub target_sd: f64,
    /// Pooled autocorrelation at lags 0..=24.
    pub target_acf: Vec<f64>,
    /// The model's expected autocorrelation at the same lags.
    pub model_acf: Vec<f64>,
}

const STATIC_VARS: [&str; 4] = ["cpu_ratio", "max_mean", "mem_ratio", "mai"];
/// Most octaves a temporal model may have.
pub const MAX_OCTAVES: usize = 4;

impl UsageParams {
    /// The parameters shipped with the crate (`usage_params.json`).
    pub fn bundled() -> UsageParams {
        static BUNDLED: OnceLock<UsageParams> = OnceLock::new();
        BUNDLED
            .get_or_init(|| {
                UsageParams::from_json(include_str!("../usage_params.json"))
                    .expect("bundled usage_params.json is valid (checked by the tests)")
            })
            .clone()
    }

    /// Parses and validates parameters in the format of `usage_params.json`.
    pub fn from_json(text: &str) -> Result<UsageParams> {
        let params: UsageParams = serde_json::from_str(text)
            .map_err(|e| TraceError::Usage(format!("bad usage parameters: {e}")))?;
        params.validate()?;
        Ok(params)
    }

    /// The CC-BY attribution line of the data the parameters were fitted on.
    pub fn attribution(&self) -> &str {
        self.provenance
            .get("attribution")
            .and_then(|v| v.as_str())
            .unwrap_or("")
    }

    /// Checks shapes and ranges; `UsageModel::with_params` calls it.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(TraceError::Usage(format!("bad usage parameters: {msg}")));
        if self.format != 1 {
            return bad(format!("format {} (expected 1)", self.format));
        }
        let g = &self.z_grid;
        if g.n < 2 || g.n > MAX_GRID || !(g.step.is_finite() && g.step > 0.0 && g.min.is_finite()) {
            return bad(format!(
                "z_grid needs 2 <= n <= {MAX_GRID} and a finite step > 0"
            ));
        }
        let tables: [(&str, &[f64], f64); 8] = [
            ("cpu_ratio", &self.cpu_ratio, 0.0),
            ("max_mean", &self.max_mean, 1.0),
            ("mem_ratio", &self.mem_ratio, 0.0),
            ("mai", &self.mai, 0.0),
            ("cpu_abs", &self.cpu_abs, 0.0),
            ("mem_abs", &self.mem_abs, 0.0),
            ("temporal.cpu.sigma", &self.temporal.cpu.sigma, 0.0),
            ("temporal.mem.sigma", &self.temporal.mem.sigma, 0.0),
        ];
        for (name, table, low) in tables {
            if table.len() != g.n {
                return bad(format!(
                    "{name} has {} entries, z_grid.n is {}",
                    table.len(),
                    g.n
                ));
            }
            if !table.iter().all(|x| x.is_finite() && *x >= low) {
                return bad(format!("{name} must hold finite numbers >= {low}"));
            }
            if table.windows(2).any(|w| w[1] < w[0]) {
                return bad(format!("{name} must be non-decreasing"));
            }
        }
        let c = &self.copula;
        if c.vars.iter().map(String::as_str).ne(STATIC_VARS) {
            return bad(format!("copula.vars must be {STATIC_VARS:?}"));
        }
        if c.corr.len() != 4 || c.corr.iter().any(|row| row.len() != 4) {
            return bad("copula.corr must be 4 x 4".into());
        }
        for i in 0..4 {
            for j in 0..4 {
                let (a, b) = (c.corr[i][j], c.corr[j][i]);
                if !a.is_finite() || (a - b).abs() > 1e-9 || (i == j && (a - 1.0).abs() > 1e-9) {
                    return bad("copula.corr must be symmetric with a unit diagonal".into());
                }
            }
        }
        if cholesky4(&c.corr).is_none() {
            return bad("copula.corr is not positive definite".into());
        }
        if c.job_icc.len() != 4 || !c.job_icc.iter().all(|x| (0.0..=1.0).contains(x)) {
            return bad("copula.job_icc must hold 4 numbers in [0, 1]".into());
        }
        let t = &self.temporal;
        if t.spacings.len() > MAX_OCTAVES {
            return bad(format!("temporal has more than {MAX_OCTAVES} octaves"));
        }
        if !t.spacings.iter().all(|k| k.is_finite() && *k >= 1.0) {
            return bad("temporal.spacings must be >= 1".into());
        }
        for (name, r) in [("cpu", &t.cpu), ("mem", &t.mem)] {
            if r.fractions.len() != t.spacings.len() {
                return bad(format!(
                    "temporal.{name}.fractions needs one entry per spacing"
                ));
            }
            if !r.fractions.iter().all(|a| (0.0..=1.0).contains(a)) {
                return bad(format!("temporal.{name}.fractions must be in [0, 1]"));
            }
            if r.fractions.iter().sum::<f64>() > 1.0 + 1e-9 {
                return bad(format!("temporal.{name}.fractions sum above 1"));
            }
        }
        Ok(())
    }
}

/// Lower-triangular Cholesky factor of a 4 x 4 symmetric matrix; `None` if not positive definite.
pub(super) fn cholesky4(a: &[Vec<f64>]) -> Option<[[f64; 4]; 4]> {
    let mut l = [[0.0; 4]; 4];
    for i in 0..4 {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if d.is_nan() || d <= 1e-12 {
                    return None;
                }
                l[i][j] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_bundled_params_are_valid_and_attributed() {
        let p = UsageParams::bundled();
        p.validate().unwrap();
        assert!(p.attribution().contains("J. Wilkes and C. Reiss"));
        assert!(p.attribution().contains("CC-BY 4.0"));
        assert_eq!(p.z_grid.n, p.cpu_ratio.len());
        assert_eq!(p.temporal.cpu.fit.target_acf.len(), 25);
    }

    #[test]
    fn usage_params_validation_rejects_bad_tables() {
        let text = include_str!("../usage_params.json");
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        v["cpu_ratio"][3] = serde_json::json!(-1.0);
        assert!(matches!(
            UsageParams::from_json(&v.to_string()),
            Err(TraceError::Usage(_))
        ));
        let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
        v["copula"]["corr"][0][1] = serde_json::json!(0.99);
        v["copula"]["corr"][1][0] = serde_json::json!(0.99);
        v["copula"]["corr"][0][2] = serde_json::json!(0.99);
        v["copula"]["corr"][2][0] = serde_json::json!(0.99);
        v["copula"]["corr"][1][2] = serde_json::json!(-0.99);
        v["copula"]["corr"][2][1] = serde_json::json!(-0.99);
        assert!(UsageParams::from_json(&v.to_string()).is_err());
        assert!(UsageParams::from_json("{}").is_err());
    }
}
