//! Columnar cache of parsed `task_events` parts: one Arrow IPC file per part, holding the
//! `Events` columns, so a second run skips decompressing and parsing the CSV.
//!
//! An entry is keyed by the identity of its source file (canonical path, size, modification time
//! in ns) and `CACHE_FORMAT_VERSION`; change any and the entry is simply not found any more (old
//! entries stay until `clear_cache`). Entries are written to a temporary file and renamed into
//! place, and only after the part parsed without error, so a failing part never leaves an entry.
//! An entry that cannot be read back (damaged, other format) counts as a miss and is rewritten.
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, Float32Array, RecordBatch, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_schema::{DataType, Field, Schema};

use crate::error::{Result, TraceError};
use crate::events::Events;
use crate::parts::Part;

/// Bump when the cached columns or their meaning change.
pub const CACHE_FORMAT_VERSION: u32 = 1;

/// Extension of cache entries; `clear_cache` removes files ending in it (and temp files).
const ENTRY_EXT: &str = ".arrow";
const TEMP_MARK: &str = ".arrow.tmp-";

/// The default cache directory: `$XDG_CACHE_HOME/colosched`, else `$HOME/.cache/colosched`;
/// `None` if neither variable is set to an absolute path.
pub fn default_cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .map(|dir| dir.join("colosched"))
        .or_else(|| absolute("HOME").map(|home| home.join(".cache").join("colosched")))
}

/// `dir` if given, else the default.
pub fn resolve_cache_dir(dir: Option<&Path>) -> Option<PathBuf> {
    dir.map(Path::to_path_buf).or_else(default_cache_dir)
}

/// Who a source file is, as far as the cache is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceIdentity {
    pub canonical_path: String,
    pub size: u64,
    pub mtime_ns: u128,
}

impl SourceIdentity {
    pub fn of(path: &Path) -> Result<SourceIdentity> {
        let file_error = |e: std::io::Error| TraceError::File {
            file: path.to_path_buf(),
            msg: format!("cannot stat: {e}"),
        };
        let canonical = std::fs::canonicalize(path).map_err(file_error)?;
        let meta = std::fs::metadata(&canonical).map_err(file_error)?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        Ok(SourceIdentity {
            canonical_path: canonical.to_string_lossy().into_owned(),
            size: meta.len(),
            mtime_ns,
        })
    }

    /// FNV-1a (64 bit) of the format version and the identity: stable across runs and builds.
    pub fn hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for &b in bytes {
                hash ^= b as u64;
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        feed(&CACHE_FORMAT_VERSION.to_le_bytes());
        feed(self.canonical_path.as_bytes());
        feed(&[0]);
        feed(&self.size.to_le_bytes());
        feed(&self.mtime_ns.to_le_bytes());
        hash
    }

    fn metadata(&self) -> [(&'static str, String); 4] {
        [
            ("colosched.format_version", CACHE_FORMAT_VERSION.to_string()),
            ("colosched.source", self.canonical_path.clone()),
            ("colosched.source_size", self.size.to_string()),
            ("colosched.source_mtime_ns", self.mtime_ns.to_string()),
        ]
    }
}

/// Where the cache entry of a `task_events` part lives (whether or not it exists yet).
pub fn entry_path(cache_dir: &Path, part: &Part, identity: &SourceIdentity) -> PathBuf {
    cache_dir.join(format!(
        "task_events-{:05}-{:016x}{ENTRY_EXT}",
        part.number,
        identity.hash()
    ))
}

fn schema() -> Schema {
    Schema::new(vec![
        Field::new("time_us", DataType::UInt64, false),
        Field::new("job", DataType::UInt64, false),
        Field::new("index", DataType::UInt32, false),
        Field::new("machine", DataType::UInt64, false),
        Field::new("event", DataType::UInt8, false),
        Field::new("priority", DataType::UInt8, false),
        Field::new("cpu_request", DataType::Float32, false),
        Field::new("mem_request", DataType::Float32, false),
    ])
}

/// Reads a cache entry; `None` if it does not exist or is not a valid entry for `identity`.
pub fn read_entry(path: &Path, identity: &SourceIdentity) -> Option<Events> {
    let file = File::open(path).ok()?;
    let reader = arrow_ipc::reader::FileReader::try_new_buffered(file, None).ok()?;
    let meta = reader.custom_metadata();
    let matches = identity
        .metadata()
        .iter()
        .all(|(key, value)| meta.get(*key).map(String::as_str) == Some(value.as_str()));
    if !matches || reader.schema().fields() != schema().fields() {
        return None;
    }
    let expected_rows: usize = meta.get("colosched.rows")?.parse().ok()?;
    let mut events = Events::with_capacity(expected_rows);
    for batch in reader {
        let batch = batch.ok()?;
        let column = |i: usize| batch.column(i).as_any();
        extend_from::<UInt64Array, _>(&mut events.time_us, column(0))?;
        extend_from::<UInt64Array, _>(&mut events.job, column(1))?;
        extend_from::<UInt32Array, _>(&mut events.index, column(2))?;
        extend_from::<UInt64Array, _>(&mut events.machine, column(3))?;
        extend_from::<UInt8Array, _>(&mut events.event, column(4))?;
        extend_from::<UInt8Array, _>(&mut events.priority, column(5))?;
        extend_from::<Float32Array, _>(&mut events.cpu_request, column(6))?;
        extend_from::<Float32Array, _>(&mut events.mem_request, column(7))?;
    }
    (events.is_consistent() && events.len() == expected_rows && expected_rows > 0).then_some(events)
}

fn extend_from<A, T>(out: &mut Vec<T>, array: &dyn std::any::Any) -> Option<()>
where
    A: PrimitiveValues<T> + 'static,
    T: Copy,
{
    let array = array.downcast_ref::<A>()?;
    out.extend_from_slice(array.values_slice()?);
    Some(())
}

/// The values of a non-null primitive array.
trait PrimitiveValues<T> {
    fn values_slice(&self) -> Option<&[T]>;
}

macro_rules! primitive_values {
    ($array:ty, $t:ty) => {
        impl PrimitiveValues<$t> for $array {
            fn values_slice(&self) -> Option<&[$t]> {
                (self.null_count() == 0).then(|| &self.values()[..])
            }
        }
    };
}
primitive_values!(UInt64Array, u64);
primitive_values!(UInt32Array, u32);
primitive_values!(UInt8Array, u8);
primitive_values!(Float32Array, f32);

/// Writes a cache entry atomically (temp file + rename). On failure nothing is left behind.
pub fn write_entry(path: &Path, identity: &SourceIdentity, events: &Events) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        "{}{TEMP_MARK}{}-{}",
        name.trim_end_matches(ENTRY_EXT),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_file(&temp, identity, events).and_then(|()| std::fs::rename(&temp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn write_file(path: &Path, identity: &SourceIdentity, events: &Events) -> std::io::Result<()> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(events.time_us.clone())),
        Arc::new(UInt64Array::from(events.job.clone())),
        Arc::new(UInt32Array::from(events.index.clone())),
        Arc::new(UInt64Array::from(events.machine.clone())),
        Arc::new(UInt8Array::from(events.event.clone())),
        Arc::new(UInt8Array::from(events.priority.clone())),
        Arc::new(Float32Array::from(events.cpu_request.clone())),
        Arc::new(Float32Array::from(events.mem_request.clone())),
    ];
    let schema = Arc::new(schema());
    let batch = RecordBatch::try_new(schema.clone(), columns).map_err(std::io::Error::other)?;
    let file = File::create(path)?;
    let mut writer = arrow_ipc::writer::FileWriter::try_new_buffered(file, &schema)
        .map_err(std::io::Error::other)?;
    for (key, value) in identity.metadata() {
        writer.write_metadata(key, value);
    }
    writer.write_metadata("colosched.rows", events.len().to_string());
    writer.write(&batch).map_err(std::io::Error::other)?;
    writer.finish().map_err(std::io::Error::other)?;
    Ok(())
}

/// Removes every cache entry (and leftover temp file) in `cache_dir` (the default directory for
/// `None`); returns how many files were removed. A missing directory holds nothing: `Ok(0)`.
pub fn clear_cache(cache_dir: Option<&Path>) -> Result<u64> {
    let dir = resolve_cache_dir(cache_dir).ok_or_else(|| {
        TraceError::Usage("no cache directory: set XDG_CACHE_HOME or HOME, or pass one".into())
    })?;
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(TraceError::File {
                file: dir,
                msg: format!("cannot list cache directory: {e}"),
            })
        }
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.ends_with(ENTRY_EXT) || name.contains(TEMP_MARK)) {
            continue;
        }
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        std::fs::remove_file(&path).map_err(|e| TraceError::File {
            file: path.clone(),
            msg: format!("cannot remove cache file: {e}"),
        })?;
        removed += 1;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Events {
        Events {
            time_us: vec![0, 600_000_000, u64::MAX],
            job: vec![1, 2, 3],
            index: vec![0, 7, u32::MAX],
            machine: vec![0, 42, 43],
            event: vec![0, 1, 8],
            priority: vec![0, 9, 11],
            cpu_request: vec![0.125, f32::NAN, 1e-5],
            mem_request: vec![f32::NAN, 0.5, 0.0],
        }
    }

    fn same(a: &Events, b: &Events) -> bool {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        a.time_us == b.time_us
            && a.job == b.job
            && a.index == b.index
            && a.machine == b.machine
            && a.event == b.event
            && a.priority == b.priority
            && bits(&a.cpu_request) == bits(&b.cpu_request)
            && bits(&a.mem_request) == bits(&b.mem_request)
    }

    #[test]
    fn roundtrip_and_identity() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("part-00003-of-00500.csv");
        std::fs::write(&source, b"x").unwrap();
        let identity = SourceIdentity::of(&source).unwrap();
        let part = Part {
            number: 3,
            of: 500,
            path: source.clone(),
            gzip: false,
        };
        let cache = dir.path().join("cache");
        let entry = entry_path(&cache, &part, &identity);
        assert!(entry
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("task_events-00003-"));
        assert!(read_entry(&entry, &identity).is_none());
        write_entry(&entry, &identity, &sample()).unwrap();
        assert!(same(&read_entry(&entry, &identity).unwrap(), &sample()));

        // Another identity (the file changed size) does not match this entry.
        let other = SourceIdentity {
            size: identity.size + 1,
            ..identity.clone()
        };
        assert_ne!(other.hash(), identity.hash());
        assert!(read_entry(&entry, &other).is_none());

        // A damaged entry is a miss, not an error.
        std::fs::write(&entry, b"not arrow").unwrap();
        assert!(read_entry(&entry, &identity).is_none());

        std::fs::write(cache.join("task_events-1.arrow.tmp-1-2"), b"").unwrap();
        std::fs::write(cache.join("keep.txt"), b"").unwrap();
        assert_eq!(clear_cache(Some(&cache)).unwrap(), 2);
        assert!(cache.join("keep.txt").exists());
        assert_eq!(clear_cache(Some(&dir.path().join("nowhere"))).unwrap(), 0);
    }

    #[test]
    fn hash_is_stable() {
        let identity = SourceIdentity {
            canonical_path: "/a/b.csv".into(),
            size: 10,
            mtime_ns: 5,
        };
        // A fixed value, so that an accidental change of the hash (which would orphan every
        // user's cache entries) is noticed. Update it when CACHE_FORMAT_VERSION changes.
        assert_eq!(format!("{:016x}", identity.hash()), "77a6bc722a8aaf86");
        assert_ne!(
            identity.hash(),
            SourceIdentity {
                mtime_ns: 6,
                ..identity.clone()
            }
            .hash()
        );
    }
}
