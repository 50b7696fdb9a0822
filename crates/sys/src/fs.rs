//! Which filesystem a path is on: `statfs(2)`'s f_type, and the magic numbers of the kernel's
//! own filesystems (include/uapi/linux/magic.h).

use std::path::Path;

pub const PROC_SUPER_MAGIC: i64 = 0x9fa0;
pub const SYSFS_MAGIC: i64 = 0x6265_6572;
pub const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The filesystem type (`statfs(2)` f_type) of `path`.
pub fn fs_type(path: &Path) -> std::io::Result<i64> {
    Ok(rustix::fs::statfs(path)?.f_type as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_and_sysfs_are_told_from_a_directory_of_files() {
        assert_eq!(fs_type(Path::new("/proc")).unwrap(), PROC_SUPER_MAGIC);
        assert_eq!(fs_type(Path::new("/sys")).unwrap(), SYSFS_MAGIC);
        let dir = std::env::temp_dir();
        let t = fs_type(&dir).unwrap();
        assert!(
            ![
                PROC_SUPER_MAGIC,
                SYSFS_MAGIC,
                CGROUP_SUPER_MAGIC,
                CGROUP2_SUPER_MAGIC
            ]
            .contains(&t),
            "{} is on {t:#x}",
            dir.display()
        );
        let e = fs_type(Path::new("/nonexistent/x")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
