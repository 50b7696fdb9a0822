//! bcache statistics from sysfs, read under a root so tests can build a fake tree.
//!
//! The root is a backing device's bcache directory, `/sys/block/bcacheN/bcache/` (the layout of
//! Documentation/admin-guide/bcache.rst, "Sysfs - backing device", and the show functions in
//! drivers/md/bcache/sysfs.c and stats.c):
//!
//! - `cache_mode`: `writethrough [writeback] writearound none`, the bracketed one current;
//! - `state`: `no cache`, `clean`, `dirty` or `inconsistent`;
//! - `dirty_data`: a human-readable size (see [`parse_human_size`]);
//! - `stats_total/`, `stats_five_minute/`, `stats_hour/`, `stats_day/`, each with `cache_hits`,
//!   `cache_misses`, `cache_hit_ratio` (integer percent), `cache_bypass_hits`,
//!   `cache_bypass_misses`, `cache_miss_collisions`, `bypassed` (human size) and, on kernels
//!   that still have bcache's own readahead, `cache_readaheads`;
//! - `cache`: a symlink to the cache set `/sys/fs/bcache/<uuid>/` when attached, which has
//!   `cache_available_percent`, `bucket_size`, `block_size` (human sizes) and `cache0`, a
//!   symlink to the cache device's `bcache/` directory with `nbuckets` and `priority_stats`.
//!
//! Only `stats_total` counts since registration (or the last write to `clear_stats`); the
//! other three are decaying averages (half-lives of 5 minutes, an hour, a day), so deltas use
//! `stats_total`. The kernel folds new events into all four on a timer every 300/22 ≈ 13.6 s
//! (stats.c `accounting_delay`), so a delta over a shorter interval can be 0 or one jump.
//!
//! Occupancy: bcache has no "used blocks" counter. `priority_stats` gives the share of buckets
//! holding no data (`Unused`), and is the only occupancy figure; reading it makes the kernel sort
//! every bucket's priority under the bucket lock, which is fine once a minute.
//!
//! This machine's kernel has no bcache: the tests build the tree in a tempdir, each file written
//! as the kernel prints it.

use std::path::Path;

use colosched_sys::Sysfs;
use serde::Serialize;

/// What is wrong, and where: the sysfs file, what was found there, and why it is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bcache: {path}: {why}{}", found.as_ref().map_or(String::new(), |f| format!(" (found `{f}`)")))]
pub struct BcacheError {
    pub path: String,
    pub found: Option<String>,
    pub why: String,
}

/// A file sysfs could not give.
impl From<colosched_sys::Error> for BcacheError {
    fn from(e: colosched_sys::Error) -> BcacheError {
        BcacheError {
            path: e.path().display().to_string(),
            found: None,
            why: e.msg(),
        }
    }
}

/// Why a text is not a size as bcache prints it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("unknown size suffix `{0}`")]
    Suffix(char),
    #[error("not a size (expected e.g. `512`, `0.5k`, `1.2M`)")]
    NotASize,
    #[error("number too large")]
    TooLarge,
    #[error("size does not fit in 64 bits")]
    Over64Bits,
}

/// Parses a size as bcache prints it (`bch_hprint` in drivers/md/bcache/util.c): a number with
/// one decimal and a power-of-1024 suffix, `k M G T P E` (`512` bytes is `0.5k`, 1.2 MiB is
/// `1.2M`). Older kernels printed sizes under 1 KiB as a plain number, so no suffix means bytes.
/// Suffixes are accepted in either case, as the kernel's own parser (`bch_strtoull_h`) does.
///
/// The kernel truncates to one decimal, so the value is exact only to a tenth of its unit:
/// `1.2M` is anything from 1.2 to 1.3 MiB; this returns the lower bound, rounded down to bytes.
pub fn parse_human_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let (number, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let power = match c.to_ascii_lowercase() {
                'k' => 1,
                'm' => 2,
                'g' => 3,
                't' => 4,
                'p' => 5,
                'e' => 6,
                _ => return Err(SizeError::Suffix(c)),
            };
            (&t[..i], 10 * power)
        }
        _ => (t, 0),
    };
    let (whole, frac) = match number.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (number, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // A '.' must have digits after it (`1.k` is not a size); 9 decimals keeps u128 exact.
    let frac_ok = match frac {
        None => true,
        Some(f) => digits(f) && f.len() <= 9,
    };
    if !digits(whole) || !frac_ok {
        return Err(SizeError::NotASize);
    }
    // Exact in u128: (whole.frac as an integer) * 1024^power / 10^decimals.
    let frac = frac.unwrap_or("");
    let mantissa: u128 = format!("{whole}{frac}")
        .parse()
        .map_err(|_| SizeError::TooLarge)?;
    let bytes = (mantissa << shift) / 10u128.pow(frac.len() as u32);
    u64::try_from(bytes).map_err(|_| SizeError::Over64Bits)
}

/// bcache's cache modes (`bch_cache_modes` in sysfs.c, in that order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BcacheMode {
    Writethrough,
    Writeback,
    /// Writes go around the cache to the backing device; reads are cached.
    Writearound,
    /// Caching off.
    None,
}

/// The backing device's state (`states[]` in sysfs.c).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BcacheState {
    /// Never attached to a cache set.
    NoCache,
    Clean,
    Dirty,
    /// Run without its cache while the cache held dirty data: the data is likely corrupt.
    Inconsistent,
}

/// One `stats_*` directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BcacheStats {
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// As the kernel prints it: hits * 100 / (hits + misses), integer percent, 0 with no I/O.
    pub cache_hit_ratio_percent: u64,
    /// Hits and misses of I/O that bypassed the cache (sequential, or over the congestion
    /// threshold), counted apart.
    pub cache_bypass_hits: u64,
    pub cache_bypass_misses: u64,
    /// Bytes that bypassed the cache (lossy: see [`parse_human_size`]).
    pub bypassed_bytes: u64,
    pub cache_miss_collisions: u64,
    /// `None` on kernels that dropped bcache's own readahead and this file with it.
    pub cache_readaheads: Option<u64>,
}

/// The share of the cache device's buckets in each state (`priority_stats`, integer percent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BcachePriorityStats {
    /// Buckets holding no data: occupancy is 100 minus this.
    pub unused_percent: u64,
    pub clean_percent: u64,
    pub dirty_percent: u64,
    pub metadata_percent: u64,
}

/// The cache set the backing device is attached to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BcacheCacheSet {
    /// The set's directory name under /sys/fs/bcache (its UUID).
    pub uuid: String,
    /// Share of the cache holding no dirty data (clean data counts as available).
    pub cache_available_percent: u64,
    pub bucket_size_bytes: u64,
    pub block_size_bytes: u64,
    /// Of the first cache device (`cache0`), when the link is there: a set has one cache
    /// device in practice (multi-device sets were never finished).
    pub nbuckets: Option<u64>,
    pub priority: Option<BcachePriorityStats>,
}

impl BcacheCacheSet {
    /// Bytes of cache in use (buckets not `Unused`), when `priority_stats` was read.
    pub fn used_bytes(&self) -> Option<u64> {
        let (n, p) = (self.nbuckets?, self.priority.as_ref()?);
        Some(n * self.bucket_size_bytes / 100 * (100 - p.unused_percent.min(100)))
    }
}

/// One reading of a bcache backing device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BcacheReading {
    /// The root this was read under, for logs.
    pub root: String,
    pub cache_mode: BcacheMode,
    pub state: BcacheState,
    pub dirty_data_bytes: u64,
    pub stats_total: BcacheStats,
    pub stats_five_minute: BcacheStats,
    pub stats_hour: BcacheStats,
    pub stats_day: BcacheStats,
    /// `None` when not attached (no `cache` link).
    pub cache_set: Option<BcacheCacheSet>,
}

/// What happened between two readings, from `stats_total`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BcacheDelta {
    pub interval_s: f64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_bypass_hits: u64,
    pub cache_bypass_misses: u64,
    pub bypassed_bytes: u64,
    pub cache_miss_collisions: u64,
    /// Hits / (hits + misses) in this interval (bypassed I/O excluded, as the kernel's ratio
    /// does); `None` when there was no cached I/O.
    pub hit_ratio: Option<f64>,
    pub hits_per_s: f64,
    pub misses_per_s: f64,
    pub bypassed_bytes_per_s: f64,
    /// Change in dirty data (a gauge, so signed).
    pub dirty_data_change_bytes: i64,
    /// A counter went down: someone wrote `clear_stats`. The delta then counts from zero
    /// (the later reading's totals), like a Prometheus counter reset.
    pub reset: bool,
}

/// Attribute `rel` of `sys` refused: what was found there, and why.
fn bad(sys: &Sysfs, rel: &str, found: &str, why: impl Into<String>) -> BcacheError {
    BcacheError {
        path: sys.root.join(rel).display().to_string(),
        found: Some(found.to_string()),
        why: why.into(),
    }
}

fn parse_u64(sys: &Sysfs, rel: &str, t: &str) -> Result<u64, BcacheError> {
    t.trim()
        .parse()
        .map_err(|_| bad(sys, rel, t, "not an unsigned integer"))
}

fn read_u64(sys: &Sysfs, rel: &str) -> Result<u64, BcacheError> {
    parse_u64(sys, rel, &sys.attr(rel)?)
}

fn read_size(sys: &Sysfs, rel: &str) -> Result<u64, BcacheError> {
    let t = sys.attr(rel)?;
    parse_human_size(&t).map_err(|why| bad(sys, rel, &t, why.to_string()))
}

/// The bracketed word of a `bch_snprint_string_list` file.
fn selected(sys: &Sysfs, rel: &str, text: &str) -> Result<String, BcacheError> {
    let picked: Vec<&str> = text
        .split_whitespace()
        .filter_map(|w| w.strip_prefix('[')?.strip_suffix(']'))
        .collect();
    match picked[..] {
        [one] => Ok(one.to_string()),
        _ => Err(bad(
            sys,
            rel,
            text,
            "expected exactly one [bracketed] choice",
        )),
    }
}

/// One `stats_*` directory, `dir`.
fn read_stats(sys: &Sysfs, dir: &str) -> Result<BcacheStats, BcacheError> {
    let at = |name: &str| format!("{dir}/{name}");
    let readaheads = at("cache_readaheads");
    Ok(BcacheStats {
        cache_hits: read_u64(sys, &at("cache_hits"))?,
        cache_misses: read_u64(sys, &at("cache_misses"))?,
        cache_hit_ratio_percent: read_u64(sys, &at("cache_hit_ratio"))?,
        cache_bypass_hits: read_u64(sys, &at("cache_bypass_hits"))?,
        cache_bypass_misses: read_u64(sys, &at("cache_bypass_misses"))?,
        bypassed_bytes: read_size(sys, &at("bypassed"))?,
        cache_miss_collisions: read_u64(sys, &at("cache_miss_collisions"))?,
        cache_readaheads: match sys.attr_if_any(&readaheads)? {
            Some(t) => Some(parse_u64(sys, &readaheads, &t)?),
            None => None,
        },
    })
}

/// Parses `priority_stats` (the `__bch_cache` show function in sysfs.c):
/// `Unused:\t\t30%\nClean:\t\t60%\nDirty:\t\t8%\nMetadata:\t2%\nAverage:\t…\n…`.
fn read_priority_stats(sys: &Sysfs, rel: &str) -> Result<BcachePriorityStats, BcacheError> {
    let text = sys.attr(rel)?;
    let get = |key: &str| -> Result<u64, BcacheError> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .ok_or_else(|| BcacheError {
                path: sys.root.join(rel).display().to_string(),
                found: None,
                why: format!("no `{key}:` line"),
            })?;
        let v = line.trim();
        v.strip_suffix('%')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| bad(sys, rel, v, format!("`{key}` is not an integer percent")))
    };
    Ok(BcachePriorityStats {
        unused_percent: get("Unused")?,
        clean_percent: get("Clean")?,
        dirty_percent: get("Dirty")?,
        metadata_percent: get("Metadata")?,
    })
}

/// The cache set, through the backing device's `cache` link.
fn read_cache_set(sys: &Sysfs) -> Result<BcacheCacheSet, BcacheError> {
    // The link's target ends in the set's UUID (…/fs/bcache/<uuid>).
    let uuid = sys.link_name("cache").unwrap_or_default();
    let (nbuckets, priority) = if sys.has("cache/cache0") {
        (
            Some(read_u64(sys, "cache/cache0/nbuckets")?),
            Some(read_priority_stats(sys, "cache/cache0/priority_stats")?),
        )
    } else {
        (None, None)
    };
    Ok(BcacheCacheSet {
        uuid,
        cache_available_percent: read_u64(sys, "cache/cache_available_percent")?,
        bucket_size_bytes: read_size(sys, "cache/bucket_size")?,
        block_size_bytes: read_size(sys, "cache/block_size")?,
        nbuckets,
        priority,
    })
}

impl BcacheReading {
    /// Reads a backing device's bcache directory, e.g. `/sys/block/bcache0/bcache`, through
    /// `colosched_sys::Sysfs` rooted there.
    pub fn read(root: &Path) -> Result<Self, BcacheError> {
        let sys = Sysfs::new(root);
        let mode_text = sys.attr("cache_mode")?;
        let cache_mode = match selected(&sys, "cache_mode", &mode_text)?.as_str() {
            "writethrough" => BcacheMode::Writethrough,
            "writeback" => BcacheMode::Writeback,
            "writearound" => BcacheMode::Writearound,
            "none" => BcacheMode::None,
            other => return Err(bad(&sys, "cache_mode", other, "unknown cache mode")),
        };
        let state = match sys.attr("state")?.trim() {
            "no cache" => BcacheState::NoCache,
            "clean" => BcacheState::Clean,
            "dirty" => BcacheState::Dirty,
            "inconsistent" => BcacheState::Inconsistent,
            other => return Err(bad(&sys, "state", other, "unknown state")),
        };
        Ok(BcacheReading {
            root: root.display().to_string(),
            cache_mode,
            state,
            dirty_data_bytes: read_size(&sys, "dirty_data")?,
            stats_total: read_stats(&sys, "stats_total")?,
            stats_five_minute: read_stats(&sys, "stats_five_minute")?,
            stats_hour: read_stats(&sys, "stats_hour")?,
            stats_day: read_stats(&sys, "stats_day")?,
            cache_set: if sys.has("cache") {
                Some(read_cache_set(&sys)?)
            } else {
                None
            },
        })
    }

    /// What happened between `earlier` and `self`, `interval_s` seconds apart.
    pub fn delta(&self, earlier: &Self, interval_s: f64) -> Result<BcacheDelta, BcacheError> {
        if !(interval_s > 0.0 && interval_s.is_finite()) {
            return Err(BcacheError {
                path: self.root.clone(),
                found: Some(interval_s.to_string()),
                why: "delta interval must be a positive number of seconds".to_string(),
            });
        }
        let (new, old) = (&self.stats_total, &earlier.stats_total);
        let pairs = [
            (new.cache_hits, old.cache_hits),
            (new.cache_misses, old.cache_misses),
            (new.cache_bypass_hits, old.cache_bypass_hits),
            (new.cache_bypass_misses, old.cache_bypass_misses),
            (new.bypassed_bytes, old.bypassed_bytes),
            (new.cache_miss_collisions, old.cache_miss_collisions),
        ];
        // `bypassed` is a rounded human size, so it alone may wobble down by its rounding
        // without a reset; only the exact counters decide.
        let reset = pairs[..4].iter().chain(&pairs[5..]).any(|(n, o)| n < o);
        let d = |(n, o): (u64, u64)| if reset { n } else { n.saturating_sub(o) };
        let [hits, misses, bypass_hits, bypass_misses, bypassed, collisions] = pairs.map(d);
        Ok(BcacheDelta {
            interval_s,
            cache_hits: hits,
            cache_misses: misses,
            cache_bypass_hits: bypass_hits,
            cache_bypass_misses: bypass_misses,
            bypassed_bytes: bypassed,
            cache_miss_collisions: collisions,
            hit_ratio: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
            hits_per_s: hits as f64 / interval_s,
            misses_per_s: misses as f64 / interval_s,
            bypassed_bytes_per_s: bypassed as f64 / interval_s,
            dirty_data_change_bytes: self.dirty_data_bytes as i64 - earlier.dirty_data_bytes as i64,
            reset,
        })
    }
}

#[cfg(test)]
mod tests {
    //! No bcache on this kernel (module doc): each test builds a sysfs tree in a tempdir, every
    //! file written as the kernel prints it (value and trailing newline), to the layout in
    //! Documentation/admin-guide/bcache.rst and drivers/md/bcache/{sysfs.c,stats.c}.

    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{text}\n")).unwrap();
    }

    /// Values of one `stats_*` directory: hits, misses, bypass hits, bypass misses, bypassed
    /// (as printed), collisions, readaheads (None: file absent, as on newer kernels).
    struct Stats(u64, u64, u64, u64, &'static str, u64, Option<u64>);

    fn write_stats(dir: &Path, s: &Stats) {
        write(&dir.join("cache_hits"), &s.0.to_string());
        write(&dir.join("cache_misses"), &s.1.to_string());
        // DIV_SAFE(hits * 100, hits + misses): integer division, 0 when both are 0.
        let ratio = (s.0 * 100).checked_div(s.0 + s.1).unwrap_or(0);
        write(&dir.join("cache_hit_ratio"), &ratio.to_string());
        write(&dir.join("cache_bypass_hits"), &s.2.to_string());
        write(&dir.join("cache_bypass_misses"), &s.3.to_string());
        write(&dir.join("bypassed"), s.4);
        write(&dir.join("cache_miss_collisions"), &s.5.to_string());
        if let Some(r) = s.6 {
            write(&dir.join("cache_readaheads"), &r.to_string());
        }
    }

    /// /sys/block/bcache0/bcache and /sys/fs/bcache/<uuid> under `sys`, attached, writeback.
    /// Returns the backing device's bcache directory.
    fn build_tree(sys: &Path, total: &Stats, dirty: &str) -> PathBuf {
        let root = sys.join("block/bcache0/bcache");
        let uuid = "f8c3a1d2-5b6e-4c7f-9a0b-1c2d3e4f5a6b";
        let set = sys.join("fs/bcache").join(uuid);
        let cdev = sys.join("block/sdb/bcache");
        write(
            &root.join("cache_mode"),
            "writethrough [writeback] writearound none",
        );
        write(&root.join("state"), "dirty");
        write(&root.join("dirty_data"), dirty);
        write_stats(&root.join("stats_total"), total);
        write_stats(
            &root.join("stats_five_minute"),
            &Stats(120, 40, 3, 1, "1.5M", 0, Some(2)),
        );
        write_stats(
            &root.join("stats_hour"),
            &Stats(900, 310, 20, 9, "12.0M", 0, Some(15)),
        );
        write_stats(
            &root.join("stats_day"),
            &Stats(8000, 2500, 150, 70, "96.3M", 1, Some(110)),
        );
        write(&set.join("cache_available_percent"), "91");
        write(&set.join("bucket_size"), "512.0k");
        write(&set.join("block_size"), "4.0k");
        write(&cdev.join("nbuckets"), "409600");
        // The kernel's format: tab-separated, 31 quantiles in brackets.
        let quantiles = vec!["0"; 31].join(" ");
        write(
            &cdev.join("priority_stats"),
            &format!(
                "Unused:\t\t30%\nClean:\t\t59%\nDirty:\t\t9%\nMetadata:\t1%\nAverage:\t61\n\
                 Sectors per Q:\t4505600\nQuantiles:\t[{quantiles}]"
            ),
        );
        // Relative links, like sysfs's own (whose depth differs: /sys/block/bcache0 is itself
        // a link into /sys/devices/virtual/block).
        symlink(format!("../../../fs/bcache/{uuid}"), root.join("cache")).unwrap();
        symlink("../../../block/sdb/bcache", set.join("cache0")).unwrap();
        root
    }

    const TOTAL: Stats = Stats(754_320, 102_431, 5_120, 2_048, "1.2G", 7, Some(311));

    #[test]
    fn human_sizes() {
        assert_eq!(parse_human_size("0.5k"), Ok(512));
        assert_eq!(parse_human_size("1.2M\n"), Ok(1_258_291)); // 1.2 * 2^20, rounded down
        assert_eq!(parse_human_size("512.0k"), Ok(512 * 1024));
        assert_eq!(parse_human_size("3.0G"), Ok(3 << 30));
        assert_eq!(parse_human_size("1.5T"), Ok(3 << 39));
        assert_eq!(parse_human_size("2.0P"), Ok(2 << 50));
        assert_eq!(parse_human_size("0.0k"), Ok(0));
        // Old kernels: plain bytes under 1 KiB, no decimal above.
        assert_eq!(parse_human_size("0"), Ok(0));
        assert_eq!(parse_human_size("512"), Ok(512));
        assert_eq!(parse_human_size("12M"), Ok(12 << 20));
        assert_eq!(parse_human_size("4K"), Ok(4096));
        for bad in [
            "", "M", ".5k", "1.k", "1.2X", "-1.0k", "1,2M", "1.2.3M", "16.0E0", "16.0E",
        ] {
            assert!(parse_human_size(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(parse_human_size("15.9E"), Ok(((159u128 << 60) / 10) as u64));
    }

    #[test]
    fn reads_tree_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let root = build_tree(dir.path(), &TOTAL, "3.1G");
        let r = BcacheReading::read(&root).unwrap();
        assert_eq!(r.cache_mode, BcacheMode::Writeback);
        assert_eq!(r.state, BcacheState::Dirty);
        assert_eq!(r.dirty_data_bytes, (31u64 << 30) / 10);
        assert_eq!(
            r.stats_total,
            BcacheStats {
                cache_hits: 754_320,
                cache_misses: 102_431,
                cache_hit_ratio_percent: 88,
                cache_bypass_hits: 5_120,
                cache_bypass_misses: 2_048,
                bypassed_bytes: (12u64 << 30) / 10,
                cache_miss_collisions: 7,
                cache_readaheads: Some(311),
            }
        );
        assert_eq!(r.stats_five_minute.cache_hit_ratio_percent, 75);
        assert_eq!(r.stats_five_minute.bypassed_bytes, 3 << 19);
        assert_eq!(r.stats_hour.cache_hits, 900);
        assert_eq!(r.stats_day.cache_miss_collisions, 1);
        let set = r.cache_set.as_ref().unwrap();
        assert_eq!(set.uuid, "f8c3a1d2-5b6e-4c7f-9a0b-1c2d3e4f5a6b");
        assert_eq!(set.cache_available_percent, 91);
        assert_eq!(set.bucket_size_bytes, 512 * 1024);
        assert_eq!(set.block_size_bytes, 4096);
        assert_eq!(set.nbuckets, Some(409_600));
        assert_eq!(
            set.priority,
            Some(BcachePriorityStats {
                unused_percent: 30,
                clean_percent: 59,
                dirty_percent: 9,
                metadata_percent: 1
            })
        );
        // 200 GiB of buckets, 70 % holding data.
        assert_eq!(set.used_bytes(), Some((200u64 << 30) / 100 * 70));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["cache_mode"], "writeback");
        assert_eq!(json["state"], "dirty");
    }

    #[test]
    fn detached_device_and_newer_kernel_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("bcache");
        write(
            &root.join("cache_mode"),
            "[writethrough] writeback writearound none",
        );
        write(&root.join("state"), "no cache");
        write(&root.join("dirty_data"), "0.0k");
        for s in [
            "stats_total",
            "stats_five_minute",
            "stats_hour",
            "stats_day",
        ] {
            write_stats(&root.join(s), &Stats(0, 0, 0, 0, "0.0k", 0, None));
        }
        let r = BcacheReading::read(&root).unwrap();
        assert_eq!(r.cache_mode, BcacheMode::Writethrough);
        assert_eq!(r.state, BcacheState::NoCache);
        assert_eq!(r.cache_set, None);
        assert_eq!(r.stats_total.cache_readaheads, None);
        assert_eq!(r.stats_total.cache_hit_ratio_percent, 0);
    }

    #[test]
    fn delta_over_stats_total() {
        let dir = tempfile::tempdir().unwrap();
        let a = BcacheReading::read(&build_tree(&dir.path().join("a"), &TOTAL, "3.1G")).unwrap();
        let later = Stats(756_320, 102_931, 5_220, 2_048, "1.3G", 7, Some(311));
        let b = BcacheReading::read(&build_tree(&dir.path().join("b"), &later, "3.0G")).unwrap();
        let d = b.delta(&a, 20.0).unwrap();
        assert_eq!((d.cache_hits, d.cache_misses), (2000, 500));
        assert_eq!((d.cache_bypass_hits, d.cache_bypass_misses), (100, 0));
        assert_eq!(d.cache_miss_collisions, 0);
        assert_eq!(d.hit_ratio, Some(0.8));
        assert_eq!(d.hits_per_s, 100.0);
        assert_eq!(d.misses_per_s, 25.0);
        assert_eq!(d.bypassed_bytes, (13u64 << 30) / 10 - (12u64 << 30) / 10);
        assert_eq!(
            d.dirty_data_change_bytes,
            (30i64 << 30) / 10 - (31i64 << 30) / 10
        );
        assert!(!d.reset);
        assert!(a.delta(&a, 0.0).is_err());
    }

    #[test]
    fn delta_after_clear_stats_counts_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let a = BcacheReading::read(&build_tree(&dir.path().join("a"), &TOTAL, "3.1G")).unwrap();
        let cleared = Stats(40, 10, 0, 0, "0.0k", 0, Some(0));
        let b = BcacheReading::read(&build_tree(&dir.path().join("b"), &cleared, "3.1G")).unwrap();
        let d = b.delta(&a, 10.0).unwrap();
        assert!(d.reset);
        assert_eq!((d.cache_hits, d.cache_misses), (40, 10));
        assert_eq!(d.hit_ratio, Some(0.8));
    }

    #[test]
    fn bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = build_tree(dir.path(), &TOTAL, "3.1G");

        write(&root.join("stats_hour/cache_misses"), "12a");
        let e = BcacheReading::read(&root).unwrap_err();
        assert!(e.path.ends_with("stats_hour/cache_misses"), "{e}");
        assert_eq!(e.found.as_deref(), Some("12a"));
        write(&root.join("stats_hour/cache_misses"), "310");

        write(&root.join("dirty_data"), "3.1Q");
        let e = BcacheReading::read(&root).unwrap_err();
        assert!(
            e.to_string().contains("dirty_data") && e.to_string().contains("`3.1Q`"),
            "{e}"
        );
        write(&root.join("dirty_data"), "3.1G");

        write(
            &root.join("cache_mode"),
            "writethrough writeback writearound none",
        );
        let e = BcacheReading::read(&root).unwrap_err();
        assert!(
            e.path.ends_with("cache_mode") && e.why.contains("bracketed"),
            "{e}"
        );
        write(&root.join("cache_mode"), "[writeback]");

        write(&root.join("state"), "busy");
        assert!(BcacheReading::read(&root)
            .unwrap_err()
            .path
            .ends_with("state"));
        write(&root.join("state"), "clean");

        fs::remove_file(root.join("stats_day/bypassed")).unwrap();
        let e = BcacheReading::read(&root).unwrap_err();
        assert!(e.path.ends_with("stats_day/bypassed"), "{e}");
        write(&root.join("stats_day/bypassed"), "1.0M");

        let prio = root.join("cache/cache0/priority_stats");
        write(&prio, "Unused:\t\tlots\nClean:\t\t59%");
        let e = BcacheReading::read(&root).unwrap_err();
        assert!(
            e.path.ends_with("priority_stats") && e.why.contains("Unused"),
            "{e}"
        );
        write(&prio, "Clean:\t\t59%");
        let e = BcacheReading::read(&root).unwrap_err();
        assert!(e.why.contains("no `Unused:` line"), "{e}");

        // Everything restored but priority_stats: fix it and the tree reads again.
        write(
            &prio,
            "Unused:\t\t0%\nClean:\t\t90%\nDirty:\t\t9%\nMetadata:\t1%",
        );
        let r = BcacheReading::read(&root).unwrap();
        assert_eq!(r.state, BcacheState::Clean);
    }

    #[test]
    fn no_bcache_on_this_kernel() {
        // The point of the fake trees: say so, and check it stays true where these tests run.
        if Path::new("/sys/fs/bcache").exists() {
            eprintln!("note: this kernel has bcache; the tests still use fake trees");
        }
        let e = BcacheReading::read(Path::new("/sys/block/bcache0/bcache"));
        if Path::new("/sys/block/bcache0").exists() {
            eprintln!("skipped: a real bcache0 exists; not asserting its absence");
            return;
        }
        let e = e.unwrap_err();
        assert!(e.path.ends_with("cache_mode"), "{e}");
    }
}
