//! Counter-based random numbers: the `counter`-th draw of a stream of a key, computable in any
//! order without state, and standard normals by table lookup.
use std::sync::OnceLock;

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const STREAM_MUL: u64 = 0x632B_E59B_D9B4_E019;

#[inline(always)]
pub(super) fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `counter`-th 64-bit draw of stream `stream` of `key`: a wyrand-style mix (one 64 x 64 ->
/// 128-bit multiply) of a Weyl sequence, which is fast and passes the usual statistical tests.
#[inline(always)]
pub(super) fn draw(key: u64, stream: u64, counter: u64) -> u64 {
    let x = key
        .wrapping_add(stream.wrapping_mul(STREAM_MUL))
        .wrapping_add(counter.wrapping_mul(GOLDEN))
        .wrapping_add(0xA076_1D64_78BD_642F);
    let t = (x as u128).wrapping_mul((x ^ 0xE703_7ED1_A0B4_28DB) as u128);
    (t >> 64) as u64 ^ t as u64
}

/// Levels of the tabulated standard normal.
const NORMAL_LEVELS: usize = 1024;

/// A standard normal by table lookup: slot `s` of a draw (bits `10s..10s+10`, so six per draw)
/// picks one of 1,024 equiprobable levels, the normal quantiles at `(k + 0.5) / 1024` rescaled to
/// unit variance (range +-3.3). Exact quantiles, one load per normal.
#[derive(Clone, Copy)]
pub(super) struct Normals(&'static [f64; NORMAL_LEVELS]);

impl std::fmt::Debug for Normals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Normals({NORMAL_LEVELS} levels)")
    }
}

impl Normals {
    pub(super) fn get_table() -> Normals {
        static TABLE: OnceLock<[f64; NORMAL_LEVELS]> = OnceLock::new();
        Normals(TABLE.get_or_init(|| {
            let mut t = [0.0; NORMAL_LEVELS];
            for (k, z) in t.iter_mut().enumerate() {
                *z = inv_normal_cdf((k as f64 + 0.5) / NORMAL_LEVELS as f64);
            }
            let sd = (t.iter().map(|z| z * z).sum::<f64>() / NORMAL_LEVELS as f64).sqrt();
            t.map(|z| z / sd)
        }))
    }

    #[inline(always)]
    pub(super) fn at(self, h: u64, slot: u32) -> f64 {
        self.0[((h >> (10 * slot)) & (NORMAL_LEVELS as u64 - 1)) as usize]
    }
}

/// Inverse of the standard normal CDF, 0 < p < 1 (Acklam's rational approximation, relative
/// error below 1.2e-9).
fn inv_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const LOW: f64 = 0.024_25;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - LOW {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

// Streams. Static draws use counter 0; the per-window streams use the window or anchor index.
pub(super) const S_JOB_KEY: u64 = 8; // counter = job ID
pub(super) const S_TASK_KEY: u64 = 9; // counter = task index
pub(super) const S_JOB: u64 = 0; // slots 0..4: job-level copula normals
pub(super) const S_TASK: u64 = 1; // slots 0..4: task-level copula normals; 4, 5: sigma (cpu, mem)
pub(super) const S_WHITE: u64 = 16; // counter = window; slots 0, 1: (cpu, mem)
pub(super) const S_ANCHOR: u64 = 24; // + octave; counter = anchor index; slots 0, 1: (cpu, mem)
