//! Online backup (`POST /v1/admin/backup`) and restore (`episodic restore`): the store's
//! state at one log position, copied while the server goes on serving, and brought back
//! into a fresh data directory.
//!
//! A backup is a directory under the configured backup root, named by the server
//! (`<UTC time>-<log sequence>`), laid out like a data directory plus a manifest:
//!
//! ```text
//! log/events.log     the event log up to the backup's position (events and their vectors)
//! audit/audit.log    the audit trail up to the same position
//! audit/hash.key     the secret of the trail's keyed hashes
//! keys.json          the key records (digests only; never the plaintext admin.key)
//! manifest.json      position, live events, and each file's size and SHA-256
//! ```
//!
//! Invariants:
//! - consistent: the writer takes a barrier between two batches ([`super::writer::Barrier`])
//!   after flushing the audit queue; every write acknowledged before the backup was asked
//!   for is in it, with its audit entry, and nothing past the barrier is; the copy itself
//!   runs on a blocking thread from frozen prefixes while writes go on;
//! - complete or absent: files are written into a hidden `.partial` directory, fsynced, and
//!   the directory renamed to its name only then, so a listed backup is whole;
//! - no index is copied: indexes are derived, and a restore rebuilds them from the log,
//!   whose records hold every event's vector, so nothing is embedded again;
//! - a restore checks every file against the manifest before it copies anything, and writes
//!   only into a new or empty directory.

use std::io::{Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::writer::{Barrier, Command};
use super::{Engine, Error, ALL_TENANTS};
use crate::audit::{AuditAction, AuditEntry};
use crate::fsutil;
use crate::model::Timestamp;

/// The manifest's file name inside a backup.
pub const MANIFEST: &str = "manifest.json";
/// The manifest format this build writes and reads.
const FORMAT: u32 = 1;
/// Every file a backup may hold, relative to its directory (a manifest naming another is
/// refused).
const FILES: [&str; 4] = [
    "log/events.log",
    "audit/audit.log",
    "audit/hash.key",
    "keys.json",
];

/// Why a backup or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The store's log is not a local file (cluster mode replicates streams instead).
    #[error("online backup needs the local file log; a cluster's streams are replicated instead")]
    Unsupported,
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The backup is not one this build can restore, or a file differs from its manifest.
    #[error("{0}")]
    Invalid(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupFile {
    /// Its path inside the backup (`log/events.log`, …).
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Hex SHA-256 of its content.
    pub sha256: String,
}

/// A backup's manifest, and what `POST /v1/admin/backup` answers.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupReport {
    /// Manifest format (1).
    pub format: u32,
    /// The backup's name: its directory under the backup root.
    pub backup_id: String,
    /// Where it was written (absolute when the root is), on the server's file system.
    #[serde(default)]
    pub path: String,
    /// When the barrier was taken.
    pub created_at: Timestamp,
    /// The last event-log sequence it holds (0 for an empty log): every write acknowledged
    /// before the backup was asked for is at or below it.
    pub log_sequence: u64,
    /// Live events at that position, every tenant's.
    pub events: usize,
    /// Bytes of all its files.
    pub bytes: u64,
    /// Its files.
    pub files: Vec<BackupFile>,
}

/// What `episodic restore` did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestoreReport {
    /// The backup restored.
    pub backup_id: String,
    /// Its log position.
    pub log_sequence: u64,
    /// Live events the backup's manifest counts.
    pub events: usize,
    /// The new data directory.
    pub data_dir: String,
    /// Files copied, each checked against the manifest.
    pub files: Vec<BackupFile>,
}

impl Engine {
    /// Takes an online backup under the configured backup directory (see the module's
    /// invariants); audited as a store-wide `backup` by `key_id`.
    pub async fn backup(&self, key_id: &str) -> Result<BackupReport, Error> {
        if !matches!(self.config.log, crate::store::LogLocation::Local) {
            return Err(Error::Backup(BackupError::Unsupported));
        }
        let barrier = self.ask(Command::Backup).await?.map_err(Error::from)?;
        let created_at = Timestamp::now();
        let root = self.config.backup_dir.clone();
        let hash_key = self.shared.paths.hash_key.clone();
        let keys = self.config.data_dir.join("keys.json");
        let report = tokio::task::spawn_blocking(move || {
            write_backup(&root, barrier, &hash_key, &keys, created_at)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
        .map_err(Error::Backup)?;
        let detail = serde_json::json!({
            "backupId": report.backup_id,
            "logSequence": report.log_sequence,
            "events": report.events,
        });
        self.audit(AuditEntry::new(
            ALL_TENANTS,
            key_id,
            AuditAction::Backup,
            Vec::new(),
            detail,
        ));
        Ok(report)
    }
}

fn write_backup(
    root: &Path,
    barrier: Barrier,
    hash_key: &Path,
    keys: &Path,
    created_at: Timestamp,
) -> Result<BackupReport, BackupError> {
    fsutil::create_private_dir_all(root).map_err(io(root))?;
    let log_sequence = barrier.log.last_seq.unwrap_or(0);
    let stamp = created_at.to_rfc3339().replace([':', '-'], "");
    let stamp = stamp
        .split('.')
        .next()
        .unwrap_or(&stamp)
        .trim_end_matches('Z');
    let name = format!("{stamp}Z-{log_sequence:010}");
    let (partial, backup_id) = claim(root, &name)?;
    let written = (|| {
        let mut files = vec![
            copy_prefix(barrier.log.file, barrier.log.len, &partial, FILES[0])?,
            copy_prefix(barrier.audit.file, barrier.audit.len, &partial, FILES[1])?,
        ];
        let key = std::fs::File::open(hash_key).map_err(io(hash_key))?;
        let len = key.metadata().map_err(io(hash_key))?.len();
        files.push(copy_prefix(key, len, &partial, FILES[2])?);
        // The key file is replaced whole by an atomic rename: whichever version is open
        // here is complete.
        match std::fs::File::open(keys) {
            Ok(f) => {
                let len = f.metadata().map_err(io(keys))?.len();
                files.push(copy_prefix(f, len, &partial, FILES[3])?);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(keys)(e)),
        }
        let report = BackupReport {
            format: FORMAT,
            path: root.join(&backup_id).display().to_string(),
            backup_id: backup_id.clone(),
            created_at,
            log_sequence,
            events: barrier.events,
            bytes: files.iter().map(|f| f.bytes).sum(),
            files,
        };
        let manifest =
            serde_json::to_vec_pretty(&report).map_err(|e| BackupError::Invalid(e.to_string()))?;
        let path = partial.join(MANIFEST);
        fsutil::write_atomic(&path, &manifest, fsutil::PRIVATE_FILE).map_err(io(&path))?;
        for dir in [partial.join("log"), partial.join("audit"), partial.clone()] {
            fsutil::sync_dir(&dir).map_err(io(&dir))?;
        }
        let done = root.join(&backup_id);
        std::fs::rename(&partial, &done).map_err(io(&done))?;
        fsutil::sync_dir(root).map_err(io(root))?;
        Ok(report)
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    written
}

/// Creates the hidden working directory of a new backup named `name` (or `name-2`, … when
/// taken) and returns it with the name.
fn claim(root: &Path, name: &str) -> Result<(PathBuf, String), BackupError> {
    for n in 1..100 {
        let id = if n == 1 {
            name.to_string()
        } else {
            format!("{name}-{n}")
        };
        let partial = root.join(format!(".{id}.partial"));
        if root.join(&id).exists() {
            continue;
        }
        match std::fs::DirBuilder::new()
            .mode(fsutil::PRIVATE_DIR)
            .create(&partial)
        {
            Ok(()) => return Ok((partial, id)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&partial)(e)),
        }
    }
    Err(BackupError::Invalid(format!(
        "too many backups named {name} under {}",
        root.display()
    )))
}

/// Copies the first `len` bytes of `from` to `dir/rel` (fsynced), hashing them.
fn copy_prefix(
    from: std::fs::File,
    len: u64,
    dir: &Path,
    rel: &str,
) -> Result<BackupFile, BackupError> {
    let to = dir.join(rel);
    if let Some(parent) = to.parent() {
        fsutil::create_private_dir_all(parent).map_err(io(parent))?;
    }
    let mut out = fsutil::create_private(&to).map_err(io(&to))?;
    let (bytes, sha256) = copy_hashing(&mut from.take(len), &mut out).map_err(io(&to))?;
    if bytes != len {
        return Err(BackupError::Invalid(format!(
            "{rel}: read {bytes} bytes of the {len} acknowledged"
        )));
    }
    out.sync_all().map_err(io(&to))?;
    Ok(BackupFile {
        path: rel.to_string(),
        bytes,
        sha256,
    })
}

/// Copies `from` to `to` (or only hashes it, without `to`); the bytes and their SHA-256.
fn copy_hashing(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
    Ok((total, hex::encode(hasher.finalize())))
}

/// Reads and checks the manifest of the backup in `from`, and every file it lists.
pub fn verify_backup(from: &Path) -> Result<BackupReport, BackupError> {
    let path = from.join(MANIFEST);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let manifest: BackupReport = serde_json::from_slice(&bytes)
        .map_err(|e| BackupError::Invalid(format!("{}: {e}", path.display())))?;
    if manifest.format != FORMAT {
        return Err(BackupError::Invalid(format!(
            "{}: format {} (this build reads {FORMAT})",
            path.display(),
            manifest.format
        )));
    }
    for needed in &FILES[..3] {
        if !manifest.files.iter().any(|f| f.path == *needed) {
            return Err(BackupError::Invalid(format!(
                "{}: lists no {needed}",
                path.display()
            )));
        }
    }
    for f in &manifest.files {
        if !FILES.contains(&f.path.as_str()) {
            return Err(BackupError::Invalid(format!(
                "{}: names an unknown file {}",
                path.display(),
                f.path
            )));
        }
        let file = from.join(&f.path);
        let mut reader = std::fs::File::open(&file).map_err(io(&file))?;
        let (bytes, sha256) = copy_hashing(&mut reader, &mut std::io::sink()).map_err(io(&file))?;
        if bytes != f.bytes || sha256 != f.sha256 {
            return Err(BackupError::Invalid(format!(
                "{}: {bytes} bytes with SHA-256 {sha256}, but the manifest says {} bytes with {}",
                file.display(),
                f.bytes,
                f.sha256
            )));
        }
    }
    Ok(manifest)
}

/// Copies the backup in `from` into `data_dir`, which must be new or empty, after checking
/// every file against the manifest; each copy is checked again and fsynced. The indexes are
/// not copied: the next open rebuilds them from the log.
pub fn restore(from: &Path, data_dir: &Path) -> Result<RestoreReport, BackupError> {
    let manifest = verify_backup(from)?;
    match std::fs::read_dir(data_dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(BackupError::Invalid(format!(
                    "{} is not empty: restore into a new or empty directory",
                    data_dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(data_dir)(e)),
    }
    fsutil::create_private_dir_all(data_dir).map_err(io(data_dir))?;
    let mut files = Vec::new();
    for f in &manifest.files {
        let source = from.join(&f.path);
        let reader = std::fs::File::open(&source).map_err(io(&source))?;
        let copied = copy_prefix(reader, f.bytes, data_dir, &f.path)?;
        if copied != *f {
            return Err(BackupError::Invalid(format!(
                "{} changed while it was restored",
                source.display()
            )));
        }
        files.push(copied);
    }
    for dir in [
        data_dir.join("log"),
        data_dir.join("audit"),
        data_dir.to_path_buf(),
    ] {
        fsutil::sync_dir(&dir).map_err(io(&dir))?;
    }
    Ok(RestoreReport {
        backup_id: manifest.backup_id,
        log_sequence: manifest.log_sequence,
        events: manifest.events,
        data_dir: data_dir.display().to_string(),
        files,
    })
}
