//! Small durable-file helpers shared by the stores, and the data directory's permissions.
//!
//! Invariants: `write_atomic` either leaves the old file or the complete new one, never a
//! mix, and both the file and its directory entry are fsynced before it returns. Nothing the
//! server keeps is for other local users: the binary sets its umask to 077 before anything
//! else ([`owner_only_umask`]); every file this crate creates in the data directory asks for
//! [`PRIVATE_FILE`] (0600) and every directory for [`PRIVATE_DIR`] (0700) explicitly, so the
//! modes hold in a process that kept a looser umask (a library user, the tests); and
//! [`tighten_tree`] strips group and other permissions from a data directory created by an
//! older build, warning only when something inside was open (making a directory created for
//! the server, say `mkdir` at 0755, owner-only is routine). Files made by the index libraries (tantivy segments, hnsw_rs dumps) follow
//! the umask; inside 0700 directories no other user can reach them either way.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of every file the server creates.
pub const PRIVATE_FILE: u32 = 0o600;
/// Mode of every directory the server creates.
pub const PRIVATE_DIR: u32 = 0o700;
/// Group and other permission bits.
const GROUP_OTHER: u32 = 0o077;

/// Sets the process umask to 077: files and directories created afterwards, by this crate or
/// any library, grant nothing to group or other. Call first thing in `main`.
pub fn owner_only_umask() {
    use rustix::fs::Mode;
    rustix::process::umask(Mode::RWXG | Mode::RWXO);
}

/// Creates or truncates `path` for writing; a file it creates is [`PRIVATE_FILE`].
pub fn create_private(path: &Path) -> io::Result<File> {
    open_with_mode(path, PRIVATE_FILE)
}

/// `create_dir_all` with every directory it creates at [`PRIVATE_DIR`].
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR)
        .create(path)
}

/// What [`tighten_tree`] changed.
#[derive(Debug, Default)]
pub struct Tightened {
    /// Files and directories whose group/other bits were removed.
    pub changed: usize,
    /// Whether the root itself was among them.
    pub root: bool,
    /// Entries that could not be inspected or changed, with the error.
    pub failed: Vec<(PathBuf, io::Error)>,
}

/// Removes group and other permissions from `root` and everything below it (directories
/// 0755 → 0700, files 0644 → 0600; owner bits are kept). Symbolic links inside the tree are
/// neither followed nor changed; `root` itself is followed. Failures are collected, not
/// fatal: the caller decides whether to warn.
pub fn tighten_tree(root: &Path) -> Tightened {
    let mut done = Tightened::default();
    let mut stack = vec![root.to_path_buf()];
    let mut first = true;
    while let Some(path) = stack.pop() {
        let meta = if first {
            fs::metadata(&path)
        } else {
            fs::symlink_metadata(&path)
        };
        first = false;
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                done.failed.push((path, e));
                continue;
            }
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            match fs::read_dir(&path) {
                Ok(entries) => stack.extend(entries.filter_map(Result::ok).map(|e| e.path())),
                Err(e) => done.failed.push((path.clone(), e)),
            }
        }
        let mode = meta.permissions().mode();
        if mode & GROUP_OTHER != 0 {
            let tight = fs::Permissions::from_mode(mode & !GROUP_OTHER & 0o7777);
            match fs::set_permissions(&path, tight) {
                Ok(()) => {
                    done.changed += 1;
                    done.root |= path == root;
                }
                Err(e) => done.failed.push((path, e)),
            }
        }
    }
    done
}

impl Tightened {
    /// How many entries below the root were open (their contents or listings were readable
    /// by other users).
    pub fn opened_inside(&self) -> usize {
        self.changed - usize::from(self.root)
    }
}

/// [`tighten_tree`] on a data directory, logging once what changed and what could not be:
/// a warning when entries inside were open, a note when only the directory itself was.
pub fn tighten_data_dir(root: &Path) {
    let done = tighten_tree(root);
    if done.opened_inside() == 0 && done.root {
        tracing::info!(dir = %root.display(), "made the data directory owner-only (0700)");
    } else if done.changed > 0 {
        tracing::warn!(
            dir = %root.display(),
            entries = done.changed,
            "removed group and other permissions from the data directory (owner-only: dirs 0700, files 0600)"
        );
    }
    if let Some((path, error)) = done.failed.first() {
        tracing::warn!(
            dir = %root.display(),
            failures = done.failed.len(),
            first = %path.display(),
            %error,
            "could not make every entry of the data directory owner-only"
        );
    }
}

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

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).expect("meta").permissions().mode() & 0o777
    }

    #[test]
    fn private_dirs_are_0700_at_every_level() {
        let dir = tempfile::tempdir().expect("tmp");
        let deep = dir.path().join("a").join("b");
        create_private_dir_all(&deep).expect("mkdir");
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&deep), 0o700);
        create_private_dir_all(&deep).expect("exists is fine");
    }

    #[test]
    fn an_old_open_tree_is_tightened_and_links_are_left_alone() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("data");
        let sub = root.join("log");
        fs::create_dir_all(&sub).expect("mkdir");
        fs::write(sub.join("events.log"), b"x").expect("write");
        fs::write(root.join("keys.json"), b"[]").expect("write");
        let outside = dir.path().join("outside");
        fs::write(&outside, b"o").expect("write");
        std::os::unix::fs::symlink(&outside, root.join("link")).expect("symlink");
        for (p, m) in [
            (&root, 0o755),
            (&sub, 0o775),
            (&sub.join("events.log"), 0o644),
            (&root.join("keys.json"), 0o664),
            (&outside, 0o644),
        ] {
            fs::set_permissions(p, fs::Permissions::from_mode(m)).expect("chmod");
        }
        let done = tighten_tree(&root);
        assert_eq!(done.changed, 4);
        assert!(done.root);
        assert_eq!(done.opened_inside(), 3, "a warning: content was open");
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(&sub), 0o700);
        assert_eq!(mode(&sub.join("events.log")), 0o600);
        assert_eq!(mode(&root.join("keys.json")), 0o600);
        assert_eq!(
            mode(&outside),
            0o644,
            "a link's target outside is not touched"
        );
        assert_eq!(tighten_tree(&root).changed, 0);
    }

    #[test]
    fn a_directory_made_for_the_server_is_tightened_without_finding_anything_open() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("data");
        create_private_dir_all(&root.join("log")).expect("mkdir");
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod");
        let done = tighten_tree(&root);
        assert_eq!(
            (done.changed, done.root, done.opened_inside()),
            (1, true, 0)
        );
        assert_eq!(mode(&root), 0o700);
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
