//! Small durable-file helpers shared by the stores.
//!
//! Invariants: `write_atomic` either leaves the old file or the complete new one, never a
//! mix, and both the file and its directory entry are fsynced before it returns.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Fsyncs a directory so renames and creations inside it are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Writes `bytes` to `path` atomically (tmp file, fsync, rename, fsync dir).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = open_with_mode(&tmp, mode)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

fn open_with_mode(path: &Path, mode: u32) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(path)
}

/// Creates `path` with `bytes` only if it does not exist yet; fsyncs file and directory.
pub fn create_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("f.json");
        write_atomic(&p, b"one", 0o600).expect("w1");
        write_atomic(&p, b"two", 0o600).expect("w2");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        assert!(!p.with_extension("tmp").exists());
    }

    #[test]
    fn create_new_refuses_to_overwrite() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("k");
        create_new(&p, b"a", 0o600).expect("create");
        assert!(create_new(&p, b"b", 0o600).is_err());
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
