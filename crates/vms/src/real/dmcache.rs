//! dm-cache (and lvmcache, which is dm-cache set up by LVM) statistics, from the status line
//! `dmsetup status <name>` prints:
//!
//! ```text
//! <start> <length> cache <metadata block size> <#used metadata blocks>/<#total metadata blocks>
//! <cache block size> <#used cache blocks>/<#total cache blocks>
//! <#read hits> <#read misses> <#write hits> <#write misses> <#demotions> <#promotions> <#dirty>
//! <#features> <features>* <#core args> <core args>* <policy name> <#policy args> <policy args>*
//! <cache metadata mode> <needs_check>
//! ```
//!
//! (one line; the format is Documentation/admin-guide/device-mapper/cache.rst, "Status", and
//! `cache_status()` in drivers/md/dm-cache-target.c). Block sizes are in 512-byte sectors. The
//! same numbers are what `lvs -o cache_total_blocks,cache_used_blocks,cache_dirty_blocks,
//! cache_read_hits,cache_read_misses,cache_write_hits,cache_write_misses` shows, since lvm2
//! reads them from this status.
//!
//! A target whose metadata failed prints only `Fail` (and `Error` when the status itself could
//! not be gathered): both are errors here, since neither carries statistics.
//!
//! The kernel keeps the hit/miss/demotion/promotion counters in 32-bit `atomic_t`s and prints
//! them as unsigned, so they wrap at 2^32 (about 12 hours at 100k IOPS): [`DmCacheStatus::delta`]
//! subtracts modulo 2^32. Hits and misses are saved in the metadata and survive a table reload;
//! demotions and promotions restart from 0, which a delta across a reload cannot tell from a
//! wrap.
//!
//! This machine's kernel has no device-mapper: the tests parse hand-written fixtures
//! (`src/real/fixtures/dmcache_*.status`, see the README there) in the documented format.

use std::fmt;
use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Bytes in a sector, the unit of the block sizes in the status line.
const SECTOR_BYTES: u64 = 512;

/// What went wrong reading a dm-cache status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DmCacheError {
    /// A field of the status line is missing or does not parse. `input` is the whole line.
    Field {
        field: &'static str,
        found: Option<String>,
        why: String,
        input: String,
    },
    /// The file or the `dmsetup` command could not be read or run.
    Read { source: String, why: String },
    /// Two readings that cannot be subtracted (different devices, or time not moving forward).
    Delta(String),
}

impl fmt::Display for DmCacheError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DmCacheError::Field {
                field,
                found,
                why,
                input,
            } => {
                write!(f, "dm-cache status: field `{field}`: {why}")?;
                if let Some(found) = found {
                    write!(f, " (found `{found}`)")?;
                }
                write!(f, " in line `{input}`")
            }
            DmCacheError::Read { source, why } => write!(f, "dm-cache status: {source}: {why}"),
            DmCacheError::Delta(why) => write!(f, "dm-cache delta: {why}"),
        }
    }
}

impl std::error::Error for DmCacheError {}

/// How writes are handled: the one io-mode word among the features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DmCacheMode {
    /// Writes go to the cache only and are written back later (dirty blocks).
    Writeback,
    /// Writes go to the cache and the origin; the cache is never dirty.
    Writethrough,
    /// Everything goes to the origin; the cache is only invalidated (degraded mode).
    Passthrough,
}

/// One reading of a dm-cache target's status line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmCacheStatus {
    /// The device name, when the line came from `dmsetup status` over all devices
    /// (`name: 0 ... cache ...`); `None` for `dmsetup status <name>`.
    pub name: Option<String>,
    pub start_sector: u64,
    pub length_sectors: u64,
    pub metadata_block_sectors: u64,
    pub metadata_used_blocks: u64,
    pub metadata_total_blocks: u64,
    pub cache_block_sectors: u64,
    pub cache_used_blocks: u64,
    pub cache_total_blocks: u64,
    /// Derived: `cache_used_blocks` and `cache_total_blocks` times the block size in bytes.
    pub cache_used_bytes: u64,
    pub cache_total_bytes: u64,
    /// Derived: used / total cache blocks, 0..=1 (0 for an empty-sized cache).
    pub occupancy: f64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    /// Derived: hits / (hits + misses) since the counters started; `None` with no I/O.
    pub read_hit_ratio: Option<f64>,
    pub write_hit_ratio: Option<f64>,
    pub demotions: u64,
    pub promotions: u64,
    pub dirty_blocks: u64,
    /// Derived: `dirty_blocks` in bytes.
    pub dirty_bytes: u64,
    /// All feature words as printed (`metadata2`, the io mode, `no_discard_passdown`).
    pub features: Vec<String>,
    pub mode: DmCacheMode,
    /// Core key/value args (the kernel prints `migration_threshold`).
    pub core_args: Vec<(String, String)>,
    pub policy: String,
    pub policy_args: Vec<(String, String)>,
    /// `false` when the metadata is read-only (`ro`): the cache then stops promoting.
    pub metadata_rw: bool,
    /// The metadata needs `cache_check` before the cache is fully usable again.
    pub needs_check: bool,
}

/// Per-interval figures between two readings of the same target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DmCacheDelta {
    pub interval_s: f64,
    pub read_hits: u64,
    pub read_misses: u64,
    pub write_hits: u64,
    pub write_misses: u64,
    pub demotions: u64,
    pub promotions: u64,
    /// Hit ratios of this interval only; `None` when the interval saw no reads (writes).
    pub read_hit_ratio: Option<f64>,
    pub write_hit_ratio: Option<f64>,
    /// Bios per second mapped to the cache or the origin, reads and writes.
    pub reads_per_s: f64,
    pub writes_per_s: f64,
    pub promotions_per_s: f64,
    pub demotions_per_s: f64,
    /// Change in resident and dirty blocks (gauges, so signed).
    pub used_blocks_change: i64,
    pub dirty_blocks_change: i64,
}

fn ratio(hits: u64, misses: u64) -> Option<f64> {
    let all = hits + misses;
    (all > 0).then(|| hits as f64 / all as f64)
}

/// Walks the whitespace-separated fields, naming each one it takes so errors can say which.
struct Fields<'a> {
    words: std::str::SplitWhitespace<'a>,
    input: &'a str,
}

impl<'a> Fields<'a> {
    fn err(&self, field: &'static str, found: Option<&str>, why: &str) -> DmCacheError {
        DmCacheError::Field {
            field,
            found: found.map(str::to_string),
            why: why.to_string(),
            input: self.input.to_string(),
        }
    }

    fn word(&mut self, field: &'static str) -> Result<&'a str, DmCacheError> {
        self.words
            .next()
            .ok_or_else(|| self.err(field, None, "missing (line ends early)"))
    }

    fn number(&mut self, field: &'static str) -> Result<u64, DmCacheError> {
        let w = self.word(field)?;
        w.parse()
            .map_err(|_| self.err(field, Some(w), "not an unsigned integer"))
    }

    /// `<used>/<total>`.
    fn pair(
        &mut self,
        used: &'static str,
        total: &'static str,
    ) -> Result<(u64, u64), DmCacheError> {
        let w = self.word(used)?;
        let (u, t) = w
            .split_once('/')
            .ok_or_else(|| self.err(used, Some(w), "expected <used>/<total>"))?;
        let u = u
            .parse()
            .map_err(|_| self.err(used, Some(w), "not an unsigned integer"))?;
        let t = t
            .parse()
            .map_err(|_| self.err(total, Some(w), "not an unsigned integer"))?;
        Ok((u, t))
    }

    /// `<#args> <args>*`, the count checked against what follows.
    fn counted(
        &mut self,
        count: &'static str,
        item: &'static str,
    ) -> Result<Vec<&'a str>, DmCacheError> {
        let n = self.number(count)?;
        (0..n).map(|_| self.word(item)).collect()
    }

    /// Key/value args: the count must be even (cache.rst says so for core and policy args).
    fn key_values(
        &mut self,
        count: &'static str,
        item: &'static str,
    ) -> Result<Vec<(String, String)>, DmCacheError> {
        let words = self.counted(count, item)?;
        if words.len() % 2 != 0 {
            let n = words.len().to_string();
            return Err(self.err(count, Some(&n), "must be even (key/value pairs)"));
        }
        Ok(words
            .chunks(2)
            .map(|kv| (kv[0].to_string(), kv[1].to_string()))
            .collect())
    }
}

impl DmCacheStatus {
    /// Parses one status line: `<start> <length> cache ...`, optionally prefixed by
    /// `<name>: ` as `dmsetup status` prints it for all devices. A target other than `cache`
    /// (e.g. `linear`, the origin of an inactive cache) is an error naming it.
    pub fn parse(line: &str) -> Result<Self, DmCacheError> {
        let line = line.trim();
        // A device name is followed by ':' and a space; a status line has no other ':'
        // before its fields, and names may contain neither whitespace nor be empty.
        let (name, rest) = match line.split_once(": ") {
            Some((n, rest)) if !n.is_empty() && !n.contains(char::is_whitespace) => {
                (Some(n.to_string()), rest)
            }
            _ => (None, line),
        };
        let mut f = Fields {
            words: rest.split_whitespace(),
            input: line,
        };
        let start_sector = f.number("start")?;
        let length_sectors = f.number("length")?;
        let target = f.word("target type")?;
        if target != "cache" {
            return Err(f.err("target type", Some(target), "not a dm-cache target"));
        }
        // `Fail`/`Error` replace the whole status (cache_status in dm-cache-target.c).
        let metadata_block_sectors = match f.word("metadata block size")? {
            w @ ("Fail" | "Error") => {
                return Err(f.err(
                    "metadata block size",
                    Some(w),
                    "the target reports a failed cache (metadata needs cache_check/repair)",
                ))
            }
            w => w
                .parse()
                .map_err(|_| f.err("metadata block size", Some(w), "not an unsigned integer"))?,
        };
        let (metadata_used_blocks, metadata_total_blocks) =
            f.pair("#used metadata blocks", "#total metadata blocks")?;
        let cache_block_sectors = f.number("cache block size")?;
        let (cache_used_blocks, cache_total_blocks) =
            f.pair("#used cache blocks", "#total cache blocks")?;
        let read_hits = f.number("#read hits")?;
        let read_misses = f.number("#read misses")?;
        let write_hits = f.number("#write hits")?;
        let write_misses = f.number("#write misses")?;
        let demotions = f.number("#demotions")?;
        let promotions = f.number("#promotions")?;
        let dirty_blocks = f.number("#dirty")?;
        let features: Vec<String> = f
            .counted("#features", "features")?
            .into_iter()
            .map(str::to_string)
            .collect();
        // The kernel always prints exactly one io-mode word (emit_flags).
        let modes: Vec<DmCacheMode> = features
            .iter()
            .filter_map(|w| match w.as_str() {
                "writeback" => Some(DmCacheMode::Writeback),
                "writethrough" => Some(DmCacheMode::Writethrough),
                "passthrough" => Some(DmCacheMode::Passthrough),
                _ => None,
            })
            .collect();
        let mode = match modes[..] {
            [m] => m,
            _ => {
                let list = features.join(" ");
                return Err(f.err(
                    "features",
                    Some(&list),
                    "expected exactly one of writeback, writethrough, passthrough",
                ));
            }
        };
        let core_args = f.key_values("#core args", "core args")?;
        let policy = f.word("policy name")?.to_string();
        let policy_args = f.key_values("#policy args", "policy args")?;
        let metadata_rw = match f.word("cache metadata mode")? {
            "rw" => true,
            "ro" => false,
            w => return Err(f.err("cache metadata mode", Some(w), "expected rw or ro")),
        };
        let needs_check = match f.word("needs_check")? {
            "-" => false,
            "needs_check" => true,
            w => return Err(f.err("needs_check", Some(w), "expected - or needs_check")),
        };
        if let Some(w) = f.words.next() {
            return Err(f.err("needs_check", Some(w), "unexpected field after needs_check"));
        }

        let block_bytes = cache_block_sectors * SECTOR_BYTES;
        Ok(DmCacheStatus {
            name,
            start_sector,
            length_sectors,
            metadata_block_sectors,
            metadata_used_blocks,
            metadata_total_blocks,
            cache_block_sectors,
            cache_used_blocks,
            cache_total_blocks,
            cache_used_bytes: cache_used_blocks * block_bytes,
            cache_total_bytes: cache_total_blocks * block_bytes,
            occupancy: if cache_total_blocks == 0 {
                0.0
            } else {
                cache_used_blocks as f64 / cache_total_blocks as f64
            },
            read_hits,
            read_misses,
            write_hits,
            write_misses,
            read_hit_ratio: ratio(read_hits, read_misses),
            write_hit_ratio: ratio(write_hits, write_misses),
            demotions,
            promotions,
            dirty_blocks,
            dirty_bytes: dirty_blocks * block_bytes,
            features,
            mode,
            core_args,
            policy,
            policy_args,
            metadata_rw,
            needs_check,
        })
    }

    /// Parses the output of `dmsetup status <name>` (or a file holding it): exactly one
    /// non-empty line. A device split over several targets is not an lvmcache layout and is
    /// refused rather than half-read. `source` names where the text came from, for errors.
    pub fn parse_output(text: &str, source: &str) -> Result<Self, DmCacheError> {
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        match lines[..] {
            [line] => Self::parse(line),
            _ => Err(DmCacheError::Read {
                source: source.to_string(),
                why: format!("expected one status line, found {}", lines.len()),
            }),
        }
    }

    /// Reads a saved `dmsetup status` output from a file.
    pub fn read_file(path: &Path) -> Result<Self, DmCacheError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| DmCacheError::Read {
            source: source.clone(),
            why: e.to_string(),
        })?;
        Self::parse_output(&text, &source)
    }

    /// Runs `dmsetup status <name>` (needs root and device-mapper) and parses it.
    pub fn from_dmsetup(name: &str) -> Result<Self, DmCacheError> {
        let source = format!("dmsetup status {name}");
        let out = Command::new("dmsetup")
            .args(["status", name])
            .output()
            .map_err(|e| DmCacheError::Read {
                source: source.clone(),
                why: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(DmCacheError::Read {
                source,
                why: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            });
        }
        Self::parse_output(&String::from_utf8_lossy(&out.stdout), &source)
    }

    /// What happened between `earlier` and `self`, `interval_s` seconds apart. The two must be
    /// readings of the same cache (same block size and number of blocks).
    pub fn delta(&self, earlier: &Self, interval_s: f64) -> Result<DmCacheDelta, DmCacheError> {
        if !(interval_s > 0.0 && interval_s.is_finite()) {
            return Err(DmCacheError::Delta(format!(
                "interval must be a positive number of seconds, got {interval_s}"
            )));
        }
        if (self.cache_block_sectors, self.cache_total_blocks)
            != (earlier.cache_block_sectors, earlier.cache_total_blocks)
        {
            return Err(DmCacheError::Delta(format!(
                "not the same cache: {} blocks of {} sectors then {} blocks of {} sectors",
                earlier.cache_total_blocks,
                earlier.cache_block_sectors,
                self.cache_total_blocks,
                self.cache_block_sectors
            )));
        }
        // The kernel's counters are 32-bit and wrap (module doc): a smaller later value has
        // gone past 2^32 - 1. (Should a kernel ever print wider counters, they do not wrap
        // here and a drop is counted as nothing rather than as a 2^32 jump.)
        let d = |new: u64, old: u64| match new.checked_sub(old) {
            Some(n) => n,
            None if old <= u64::from(u32::MAX) => (1u64 << 32) - old + new,
            None => 0,
        };
        let read_hits = d(self.read_hits, earlier.read_hits);
        let read_misses = d(self.read_misses, earlier.read_misses);
        let write_hits = d(self.write_hits, earlier.write_hits);
        let write_misses = d(self.write_misses, earlier.write_misses);
        let demotions = d(self.demotions, earlier.demotions);
        let promotions = d(self.promotions, earlier.promotions);
        Ok(DmCacheDelta {
            interval_s,
            read_hits,
            read_misses,
            write_hits,
            write_misses,
            demotions,
            promotions,
            read_hit_ratio: ratio(read_hits, read_misses),
            write_hit_ratio: ratio(write_hits, write_misses),
            reads_per_s: (read_hits + read_misses) as f64 / interval_s,
            writes_per_s: (write_hits + write_misses) as f64 / interval_s,
            promotions_per_s: promotions as f64 / interval_s,
            demotions_per_s: demotions as f64 / interval_s,
            used_blocks_change: self.cache_used_blocks as i64 - earlier.cache_used_blocks as i64,
            dirty_blocks_change: self.dirty_blocks as i64 - earlier.dirty_blocks as i64,
        })
    }
}

#[cfg(test)]
mod tests {
    //! No device-mapper on this kernel (module doc): every test parses a fixture written to
    //! the documented format, never a live device.

    use super::*;

    const WRITEBACK: &str = include_str!("fixtures/dmcache_writeback_smq.status");
    const WRITETHROUGH: &str = include_str!("fixtures/dmcache_writethrough_features.status");
    const PASSTHROUGH: &str = include_str!("fixtures/dmcache_passthrough.status");

    fn field_of(e: DmCacheError) -> &'static str {
        match e {
            DmCacheError::Field { field, .. } => field,
            other => panic!("expected a field error, got {other}"),
        }
    }

    #[test]
    fn parses_writeback_smq_fixture_exactly() {
        let s = DmCacheStatus::parse_output(WRITEBACK, "fixture").unwrap();
        let want = DmCacheStatus {
            name: None,
            start_sector: 0,
            length_sectors: 41943040,
            metadata_block_sectors: 8,
            metadata_used_blocks: 197,
            metadata_total_blocks: 2048,
            cache_block_sectors: 128,
            cache_used_blocks: 12288,
            cache_total_blocks: 16384,
            cache_used_bytes: 12288 * 65536,
            cache_total_bytes: 1 << 30,
            occupancy: 0.75,
            read_hits: 754320,
            read_misses: 102431,
            write_hits: 409201,
            write_misses: 38810,
            read_hit_ratio: Some(754320.0 / 856751.0),
            write_hit_ratio: Some(409201.0 / 448011.0),
            demotions: 5120,
            promotions: 17408,
            dirty_blocks: 311,
            dirty_bytes: 311 * 65536,
            features: vec!["metadata2".into(), "writeback".into()],
            mode: DmCacheMode::Writeback,
            core_args: vec![("migration_threshold".into(), "2048".into())],
            policy: "smq".into(),
            policy_args: vec![],
            metadata_rw: true,
            needs_check: false,
        };
        assert_eq!(s, want);
    }

    #[test]
    fn parses_writethrough_with_features() {
        let s = DmCacheStatus::parse(WRITETHROUGH).unwrap();
        assert_eq!(s.mode, DmCacheMode::Writethrough);
        assert_eq!(
            s.features,
            ["metadata2", "writethrough", "no_discard_passdown"]
        );
        assert_eq!(s.cache_block_sectors, 512);
        assert_eq!((s.cache_used_blocks, s.cache_total_blocks), (1000, 4000));
        assert_eq!(s.cache_used_bytes, 1000 * 256 * 1024);
        assert_eq!(s.occupancy, 0.25);
        assert_eq!(s.read_hit_ratio, Some(1200.0 / 4600.0));
        // No write was mapped to the cache: ratio 0, not None (there were writes).
        assert_eq!(s.write_hit_ratio, Some(0.0));
        assert_eq!(s.dirty_blocks, 0);
        assert_eq!(
            s.core_args,
            [("migration_threshold".to_string(), "4096".to_string())]
        );
        assert!(s.metadata_rw && !s.needs_check);
    }

    #[test]
    fn parses_passthrough_readonly_needs_check() {
        let s = DmCacheStatus::parse(PASSTHROUGH).unwrap();
        assert_eq!(s.mode, DmCacheMode::Passthrough);
        assert_eq!(s.features, ["passthrough"]);
        assert_eq!(s.occupancy, 0.0);
        assert_eq!(s.read_hit_ratio, Some(0.0));
        assert_eq!(s.demotions, 4000);
        assert!(!s.metadata_rw);
        assert!(s.needs_check);
    }

    #[test]
    fn parses_named_line_and_policy_args() {
        // `dmsetup status` over all devices prefixes the name; pre-4.2 kernels' mq policy
        // printed key/value policy args (cache.rst's example tunables).
        let line = "vg0-vm7: 0 2097152 cache 8 30/1024 128 10/8192 5 6 7 8 0 10 2 1 writeback \
                    2 migration_threshold 2048 mq 4 sequential_threshold 512 random_threshold 4 \
                    rw -";
        let s = DmCacheStatus::parse(line).unwrap();
        assert_eq!(s.name.as_deref(), Some("vg0-vm7"));
        assert_eq!(s.policy, "mq");
        assert_eq!(
            s.policy_args,
            [
                ("sequential_threshold".to_string(), "512".to_string()),
                ("random_threshold".to_string(), "4".to_string())
            ]
        );
        // Serialises with the derived fields, for the planner's logs.
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["mode"], "writeback");
        assert_eq!(json["cache_total_bytes"], 8192 * 65536);
    }

    #[test]
    fn delta_gives_interval_rates_and_ratios() {
        let a = DmCacheStatus::parse(WRITEBACK).unwrap();
        let b_line = "0 41943040 cache 8 199/2048 128 12800/16384 756320 102931 409701 38810 \
                      5200 17920 200 2 metadata2 writeback 2 migration_threshold 2048 smq 0 rw -";
        let b = DmCacheStatus::parse(b_line).unwrap();
        let d = b.delta(&a, 10.0).unwrap();
        assert_eq!((d.read_hits, d.read_misses), (2000, 500));
        assert_eq!((d.write_hits, d.write_misses), (500, 0));
        assert_eq!((d.demotions, d.promotions), (80, 512));
        assert_eq!(d.read_hit_ratio, Some(0.8));
        assert_eq!(d.write_hit_ratio, Some(1.0));
        assert_eq!(d.reads_per_s, 250.0);
        assert_eq!(d.writes_per_s, 50.0);
        assert_eq!(d.promotions_per_s, 51.2);
        assert_eq!(d.used_blocks_change, 512);
        assert_eq!(d.dirty_blocks_change, -111);
    }

    #[test]
    fn delta_wraps_32_bit_counters() {
        let a = DmCacheStatus::parse(WRITEBACK).unwrap();
        let mut b = a.clone();
        b.read_hits = 99; // wrapped past 2^32 - 1
        let mut a2 = a.clone();
        a2.read_hits = u64::from(u32::MAX) - 100;
        let d = b.delta(&a2, 1.0).unwrap();
        assert_eq!(d.read_hits, 200);
    }

    #[test]
    fn delta_refuses_other_cache_or_bad_interval() {
        let a = DmCacheStatus::parse(WRITEBACK).unwrap();
        let b = DmCacheStatus::parse(WRITETHROUGH).unwrap();
        assert!(matches!(b.delta(&a, 10.0), Err(DmCacheError::Delta(_))));
        assert!(matches!(a.delta(&a, 0.0), Err(DmCacheError::Delta(_))));
        assert!(matches!(a.delta(&a, f64::NAN), Err(DmCacheError::Delta(_))));
    }

    #[test]
    fn truncated_line_names_the_missing_field() {
        let cut = "0 41943040 cache 8 197/2048 128 12288/16384 754320 102431";
        assert_eq!(
            field_of(DmCacheStatus::parse(cut).unwrap_err()),
            "#write hits"
        );
        // Cut inside the feature list: the count promises two features.
        let cut = "0 41943040 cache 8 197/2048 128 12288/16384 1 2 3 4 5 6 7 2 metadata2";
        assert_eq!(field_of(DmCacheStatus::parse(cut).unwrap_err()), "features");
        // Cut just before needs_check.
        let full = WRITEBACK.trim();
        let cut = full.strip_suffix(" -").unwrap();
        assert_eq!(
            field_of(DmCacheStatus::parse(cut).unwrap_err()),
            "needs_check"
        );
    }

    #[test]
    fn non_number_names_the_field_and_shows_input() {
        let bad = WRITEBACK.replace("754320", "75x320");
        let e = DmCacheStatus::parse(&bad).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("`#read hits`"), "{msg}");
        assert!(msg.contains("`75x320`"), "{msg}");
        assert!(
            msg.contains("smq 0 rw -"),
            "message should quote the line: {msg}"
        );
        let bad = WRITEBACK.replace("12288/16384", "12288/lots");
        assert_eq!(
            field_of(DmCacheStatus::parse(&bad).unwrap_err()),
            "#total cache blocks"
        );
        let bad = WRITEBACK.replace("12288/16384", "12288");
        assert_eq!(
            field_of(DmCacheStatus::parse(&bad).unwrap_err()),
            "#used cache blocks"
        );
    }

    #[test]
    fn wrong_target_type_is_refused() {
        let e = DmCacheStatus::parse("0 41943040 linear").unwrap_err();
        assert!(e.to_string().contains("`linear`"), "{e}");
        assert_eq!(field_of(e), "target type");
    }

    #[test]
    fn fail_status_and_bad_words_are_refused() {
        let e = DmCacheStatus::parse("0 41943040 cache Fail").unwrap_err();
        assert!(e.to_string().contains("failed cache"), "{e}");
        let bad = WRITEBACK.replace(" writeback ", " writearound ");
        assert_eq!(
            field_of(DmCacheStatus::parse(&bad).unwrap_err()),
            "features"
        );
        let bad = WRITEBACK.replace(" rw -", " rx -");
        assert_eq!(
            field_of(DmCacheStatus::parse(&bad).unwrap_err()),
            "cache metadata mode"
        );
        let bad = WRITEBACK.replace("smq 0", "smq 1 odd");
        assert_eq!(
            field_of(DmCacheStatus::parse(&bad).unwrap_err()),
            "#policy args"
        );
        let bad = format!("{} extra", WRITEBACK.trim());
        assert_eq!(
            field_of(DmCacheStatus::parse(&bad).unwrap_err()),
            "needs_check"
        );
    }

    #[test]
    fn reads_file_and_refuses_several_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("status");
        std::fs::write(&p, WRITEBACK).unwrap();
        assert_eq!(
            DmCacheStatus::read_file(&p).unwrap().cache_used_blocks,
            12288
        );
        std::fs::write(&p, format!("{WRITEBACK}{WRITETHROUGH}")).unwrap();
        let e = DmCacheStatus::read_file(&p).unwrap_err();
        assert!(e.to_string().contains("found 2"), "{e}");
        let missing = dir.path().join("nope");
        let e = DmCacheStatus::read_file(&missing).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    #[test]
    fn dmsetup_on_this_kernel_fails_cleanly() {
        // No device-mapper here: the command (if installed) fails, and the error says which
        // command. Skips, with the reason, where a device of that name might exist.
        if Path::new("/dev/mapper/control").exists() {
            eprintln!("skipped: device-mapper present; this test is for a kernel without it");
            return;
        }
        let e = DmCacheStatus::from_dmsetup("colosched-no-such-cache").unwrap_err();
        assert!(
            e.to_string()
                .contains("dmsetup status colosched-no-such-cache"),
            "{e}"
        );
    }
}
