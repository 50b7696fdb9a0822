//! Test inputs shared by the reader and source tests: the real 676-row head and temporary roots.
use std::path::{Path, PathBuf};

const HEAD676: &str = "google-clusterdata-2011-2-head/task_usage/part-00000-of-00500.head676.csv";

/// The shared real data (`COLOSCHED_SHARED_DATA`, else ../../../shared/data from the crate,
/// where a clone beside ../shared finds it). Missing data fails the test, saying where it
/// looked: a test of the real rows never passes without them.
fn shared_data() -> PathBuf {
    let root = std::env::var_os("COLOSCHED_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"));
    assert!(
        root.join(HEAD676).is_file(),
        "no {HEAD676} under {} (clone beside ../shared, or set COLOSCHED_SHARED_DATA)",
        root.display()
    );
    root
}

/// A temporary trace root whose task_usage/ holds `name` with `content`.
pub(super) fn root_with(name: &str, content: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("task_usage")).unwrap();
    std::fs::write(dir.path().join("task_usage").join(name), content).unwrap();
    dir
}

/// A trace root holding the 676 real task_usage rows as part 0.
pub(super) fn head_root() -> tempfile::TempDir {
    let data = std::fs::read(shared_data().join(HEAD676)).unwrap();
    root_with("part-00000-of-00500.csv", &data)
}

pub(super) const ROW1: &str =
    "600000000,900000000,3418309,0,4155527081,0.001562,0.06787,0.07568,0.001156,\
     0.001503,0.06787,2.861e-06,0.0001869,0.03967,0.0003567,2.445,0.007243,0,1,0";
