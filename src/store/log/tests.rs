//! Unit tests of the file log: round trips, torn tails, corruption, rewrite.

use super::*;
use proptest::prelude::*;
use tempfile::TempDir;

fn setup() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("episodic.log");
    (dir, path)
}

fn payloads(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| vec![i as u8; i * 7 % 23]).collect()
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|p| p.as_slice()).collect()
}

fn reopen(path: &Path) -> (Log, Recovery) {
    Log::open(path).unwrap()
}

/// Byte offset where each of `lens` frames starts, plus the final end.
fn frame_offsets(lens: &[usize]) -> Vec<u64> {
    let mut offs = vec![HEADER_LEN];
    for l in lens {
        let last = *offs.last().unwrap();
        offs.push(last + FRAME_HEADER_LEN + *l as u64);
    }
    offs
}

fn flip_byte(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn create_writes_header_and_is_empty() {
    let (_d, path) = setup();
    let (log, rec) = Log::open(&path).unwrap();
    assert!(rec.records.is_empty());
    assert_eq!(rec.truncated_bytes, 0);
    assert_eq!(log.next_seq(), FIRST_SEQ);
    assert_eq!(log.len_bytes(), 8);
    assert_eq!(log.path(), path.as_path());
    assert_eq!(std::fs::read(&path).unwrap(), MAGIC.to_vec());
}

#[test]
fn round_trip_multiple_batches_and_empty_payloads() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    let a = log.append_batch(&[b"one", b"", b"three"]).unwrap();
    let b = log.append_batch(&[b""]).unwrap();
    let c = log.append_batch(&[b"five", b"six"]).unwrap();
    assert_eq!(a, vec![1, 2, 3]);
    assert_eq!(b, vec![4]);
    assert_eq!(c, vec![5, 6]);
    assert_eq!(log.next_seq(), 7);
    let len = log.len_bytes();
    assert_eq!(len, std::fs::metadata(&path).unwrap().len());
    drop(log);
    let (log, rec) = reopen(&path);
    let got: Vec<_> = rec
        .records
        .iter()
        .map(|r| (r.seq, r.payload.clone()))
        .collect();
    let want: Vec<(u64, Vec<u8>)> = vec![
        (1, b"one".to_vec()),
        (2, vec![]),
        (3, b"three".to_vec()),
        (4, vec![]),
        (5, b"five".to_vec()),
        (6, b"six".to_vec()),
    ];
    assert_eq!(got, want);
    assert_eq!(rec.truncated_bytes, 0);
    assert_eq!(log.next_seq(), 7);
    assert_eq!(log.len_bytes(), len);
}

#[test]
fn seq_continues_after_reopen() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a", b"b"]).unwrap();
    drop(log);
    let (mut log, _) = reopen(&path);
    assert_eq!(log.append_batch(&[b"c"]).unwrap(), vec![3]);
}

#[test]
fn group_commit_returns_seqs_in_order() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    let data = payloads(50);
    let seqs = log.append_batch(&refs(&data)).unwrap();
    assert_eq!(seqs, (1..=50).collect::<Vec<u64>>());
    assert!(log.append_batch(&[]).unwrap().is_empty());
    assert_eq!(log.next_seq(), 51);
    let (_, rec) = reopen(&path);
    let got: Vec<Vec<u8>> = rec.records.into_iter().map(|r| r.payload).collect();
    assert_eq!(got, data);
}

#[test]
fn too_large_batch_writes_nothing() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"keep"]).unwrap();
    let before = log.len_bytes();
    let big = vec![0u8; MAX_PAYLOAD + 1];
    let err = log.append_batch(&[b"ok", &big]).unwrap_err();
    assert!(
        matches!(err, LogError::TooLarge { len, max } if len == MAX_PAYLOAD + 1 && max == MAX_PAYLOAD)
    );
    assert_eq!(log.len_bytes(), before);
    assert_eq!(log.next_seq(), 2);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
}

#[test]
fn truncate_at_every_offset_of_last_two_records() {
    let (_d, path) = setup();
    let data = payloads(6);
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&refs(&data[..4])).unwrap();
    log.append_batch(&refs(&data[4..])).unwrap();
    drop(log);
    let full = std::fs::read(&path).unwrap();
    let lens: Vec<usize> = data.iter().map(Vec::len).collect();
    let offs = frame_offsets(&lens);
    assert_eq!(*offs.last().unwrap(), full.len() as u64);
    for cut in offs[4]..=offs[6] {
        std::fs::write(&path, &full[..cut as usize]).unwrap();
        let (mut log, rec) = Log::open(&path).unwrap();
        let complete = offs.iter().filter(|&&o| o <= cut).count().saturating_sub(1);
        assert_eq!(rec.records.len(), complete, "cut {cut}");
        for (i, r) in rec.records.iter().enumerate() {
            assert_eq!(r.seq, i as u64 + 1);
            assert_eq!(r.payload, data[i]);
        }
        assert_eq!(rec.truncated_bytes, cut - offs[complete], "cut {cut}");
        assert_eq!(log.len_bytes(), offs[complete]);
        let seqs = log.append_batch(&[b"after"]).unwrap();
        assert_eq!(seqs, vec![complete as u64 + 1]);
        drop(log);
        let (_, rec) = reopen(&path);
        assert_eq!(rec.records.len(), complete + 1);
        assert_eq!(rec.truncated_bytes, 0);
        assert_eq!(rec.records[complete].payload, b"after");
    }
}

#[test]
fn open_with_visits_every_record_then_cuts_a_torn_tail() {
    let (_d, path) = setup();
    let data = payloads(5);
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&refs(&data)).unwrap();
    drop(log);
    let full_len = std::fs::metadata(&path).unwrap().len();
    let torn = full_len - 3;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(torn)
        .unwrap();
    // A visitor that fails stops the open and leaves the file as it was.
    let mut seen = 0;
    let err = Log::open_with(&path, |_| {
        seen += 1;
        if seen == 2 {
            return Err(LogError::TooLarge { len: 0, max: 0 });
        }
        Ok(())
    })
    .unwrap_err();
    assert!(matches!(err, LogError::TooLarge { .. }));
    assert_eq!(seen, 2);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), torn);
    let mut visited = Vec::new();
    let (log, found) = Log::open_with(&path, |r| {
        visited.push((r.seq, r.payload));
        Ok::<(), LogError>(())
    })
    .unwrap();
    let want: Vec<(u64, Vec<u8>)> = (1..).zip(data[..4].iter().cloned()).collect();
    assert_eq!(visited, want);
    assert_eq!(found.last_seq, Some(4));
    assert!(found.truncated_bytes > 0);
    assert_eq!(log.next_seq(), 5);
    assert_eq!(log.len_bytes(), torn - found.truncated_bytes);
}

#[test]
fn flipped_byte_in_last_record_is_torn_tail() {
    let (_d, path) = setup();
    let data = payloads(4);
    let lens: Vec<usize> = data.iter().map(Vec::len).collect();
    let offs = frame_offsets(&lens);
    // crc field, seq field, and payload of the last frame.
    for at in [offs[3] + 5, offs[3] + 10, offs[4] - 1] {
        std::fs::remove_file(&path).ok();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&refs(&data)).unwrap();
        drop(log);
        flip_byte(&path, at);
        let (log, rec) = Log::open(&path).unwrap();
        assert_eq!(rec.records.len(), 3, "flip at {at}");
        assert_eq!(rec.truncated_bytes, offs[4] - offs[3]);
        assert_eq!(log.next_seq(), 4);
    }
}

#[test]
fn flipped_byte_in_middle_record_is_corrupt() {
    let (_d, path) = setup();
    let data = payloads(4);
    let lens: Vec<usize> = data.iter().map(Vec::len).collect();
    let offs = frame_offsets(&lens);
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&refs(&data)).unwrap();
    drop(log);
    flip_byte(&path, offs[2] + FRAME_HEADER_LEN);
    let before = std::fs::read(&path).unwrap();
    let err = Log::open(&path).unwrap_err();
    match &err {
        LogError::Corrupt {
            path: p, offset, ..
        } => {
            assert_eq!(p, &path.display().to_string());
            assert_eq!(*offset, offs[2]);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()) && msg.contains(&offs[2].to_string()));
    // Refusing to open must not modify the file.
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn overlong_length_in_middle_record_is_corrupt_not_torn() {
    let (_d, path) = setup();
    let data = payloads(6);
    let lens: Vec<usize> = data.iter().map(Vec::len).collect();
    let offs = frame_offsets(&lens);
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&refs(&data)).unwrap();
    drop(log);
    // Raise the declared length of frame 2 so that it runs past the end of the file.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = offs[2] as usize + 3;
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let err = Log::open(&path).unwrap_err();
    assert!(
        matches!(err, LogError::Corrupt { offset, .. } if offset == offs[2]),
        "{err:?}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "acknowledged records kept"
    );
}

#[test]
fn non_increasing_seq_is_corrupt() {
    let (_d, path) = setup();
    let mut bytes = MAGIC.to_vec();
    encode_frame(&mut bytes, 5, b"x");
    let second = bytes.len() as u64;
    encode_frame(&mut bytes, 5, b"y");
    std::fs::write(&path, &bytes).unwrap();
    let err = Log::open(&path).unwrap_err();
    assert!(matches!(err, LogError::Corrupt { offset, .. } if offset == second));
}

#[test]
fn oversized_declared_length() {
    let (_d, path) = setup();
    let mut frame = Vec::new();
    frame.extend_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
    frame.extend_from_slice(&[0u8; 12]);
    // At the tail (runs past EOF): torn.
    let mut bytes = MAGIC.to_vec();
    encode_frame(&mut bytes, 1, b"ok");
    let tail = bytes.len() as u64;
    bytes.extend_from_slice(&frame);
    bytes.extend_from_slice(&[7u8; 100]);
    std::fs::write(&path, &bytes).unwrap();
    let (_, rec) = Log::open(&path).unwrap();
    assert_eq!(rec.records.len(), 1);
    assert_eq!(rec.truncated_bytes, 16 + 100);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), tail);
    // Fits within the file: corrupt.
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&frame);
    let f = File::create(&path).unwrap();
    f.set_len(8 + 16 + MAX_PAYLOAD as u64 + 1 + 16).unwrap();
    drop(f);
    let mut f = OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all(&bytes).unwrap();
    drop(f);
    let err = Log::open(&path).unwrap_err();
    assert!(
        matches!(err, LogError::Corrupt { offset: 8, .. }),
        "{err:?}"
    );
}

#[test]
fn wrong_magic_is_corrupt() {
    let (_d, path) = setup();
    std::fs::write(&path, b"NOTALOG!and more").unwrap();
    let err = Log::open(&path).unwrap_err();
    assert!(matches!(err, LogError::Corrupt { offset: 0, .. }));
    assert!(err.to_string().contains(&path.display().to_string()));
    std::fs::write(&path, b"XP").unwrap();
    assert!(matches!(
        Log::open(&path),
        Err(LogError::Corrupt { offset: 0, .. })
    ));
    assert!(read_records(&path).is_err());
}

#[test]
fn short_header_prefix_is_torn_creation() {
    let (_d, path) = setup();
    for n in 0..8 {
        std::fs::write(&path, &MAGIC[..n]).unwrap();
        let (mut log, rec) = Log::open(&path).unwrap();
        assert!(rec.records.is_empty());
        assert_eq!(rec.truncated_bytes, n as u64);
        assert_eq!(log.append_batch(&[b"x"]).unwrap(), vec![1]);
        drop(log);
        let (_, rec) = reopen(&path);
        assert_eq!(rec.records.len(), 1);
    }
}

#[test]
fn rewrite_keeps_records_and_seqs() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a", b"b", b"c", b"d", b"e"]).unwrap();
    let keep = vec![
        LogRecord {
            seq: 2,
            payload: b"b".to_vec(),
        },
        LogRecord {
            seq: 4,
            payload: b"D!".to_vec(),
        },
    ];
    log.rewrite(&keep).unwrap();
    assert_eq!(log.next_seq(), 6, "seqs never go backwards");
    assert!(!tmp_path(&path).exists());
    assert_eq!(log.len_bytes(), std::fs::metadata(&path).unwrap().len());
    assert_eq!(log.append_batch(&[b"f"]).unwrap(), vec![6]);
    drop(log);
    let (log, rec) = reopen(&path);
    let seqs: Vec<u64> = rec.records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![2, 4, 6]);
    assert_eq!(rec.records[1].payload, b"D!");
    assert_eq!(log.next_seq(), 7);
}

#[test]
fn rewrite_can_raise_next_seq_and_empty_log() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a"]).unwrap();
    log.rewrite(&[LogRecord {
        seq: 100,
        payload: vec![],
    }])
    .unwrap();
    assert_eq!(log.next_seq(), 101);
    log.rewrite(&[]).unwrap();
    assert_eq!(log.next_seq(), 101);
    assert_eq!(log.len_bytes(), 8);
    assert_eq!(log.append_batch(&[b"z"]).unwrap(), vec![101]);
    drop(log);
    let (_, rec) = reopen(&path);
    assert_eq!(rec.records.len(), 1);
    assert_eq!(rec.records[0].seq, 101);
}

#[test]
fn rewrite_rejects_bad_input_and_leaves_log_intact() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a", b"b"]).unwrap();
    let before = std::fs::read(&path).unwrap();
    let bad = vec![
        LogRecord {
            seq: 3,
            payload: vec![],
        },
        LogRecord {
            seq: 3,
            payload: vec![],
        },
    ];
    let err = log.rewrite(&bad).unwrap_err();
    assert!(
        matches!(&err, LogError::Io { source, .. } if source.kind() == io::ErrorKind::InvalidInput)
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!tmp_path(&path).exists());
    assert_eq!(log.append_batch(&[b"c"]).unwrap(), vec![3]);
}

#[test]
fn rewrite_overwrites_stale_tmp() {
    let (_d, path) = setup();
    std::fs::write(tmp_path(&path), b"garbage from a crashed compaction").unwrap();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a"]).unwrap();
    log.rewrite(&[LogRecord {
        seq: 1,
        payload: b"a".to_vec(),
    }])
    .unwrap();
    assert!(!tmp_path(&path).exists());
    let (_, rec) = reopen(&path);
    assert_eq!(rec.records.len(), 1);
}

#[test]
fn read_records_streams_and_stops_at_torn_tail() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a", b"bb", b"ccc"]).unwrap();
    let len = log.len_bytes();
    drop(log);
    let all: Vec<LogRecord> = read_records(&path).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 3);
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 1).unwrap();
    drop(f);
    let some: Vec<LogRecord> = read_records(&path).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(some, all[..2].to_vec());
    // Read-only: the torn tail is still there.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len - 1);
    flip_byte(&path, 8 + 16);
    let items: Vec<_> = read_records(&path).unwrap().collect();
    assert_eq!(items.len(), 1);
    assert!(matches!(items[0], Err(LogError::Corrupt { offset: 8, .. })));
}

#[test]
fn garbage_never_panics() {
    let (_d, path) = setup();
    let mut seed = 0x1234_5678_u64;
    for round in 0..200u64 {
        let mut bytes = MAGIC.to_vec();
        let n = (round * 37) % 300;
        for _ in 0..n {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            bytes.push((seed >> 33) as u8);
        }
        std::fs::write(&path, &bytes).unwrap();
        let _ = Log::open(&path);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn recovered_records_are_a_prefix(
        batches in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..5),
            1..6,
        ),
        cut in any::<prop::sample::Index>(),
    ) {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        let mut written = Vec::new();
        for b in &batches {
            let seqs = log.append_batch(&refs(b)).unwrap();
            written.extend(seqs.into_iter().zip(b.iter().cloned()));
        }
        let full = log.len_bytes();
        drop(log);
        let cut = cut.index(full as usize + 1) as u64;
        OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
        let (mut log, rec) = Log::open(&path).unwrap();
        let got: Vec<(u64, Vec<u8>)> =
            rec.records.into_iter().map(|r| (r.seq, r.payload)).collect();
        let lens: Vec<usize> = written.iter().map(|(_, p)| p.len()).collect();
        let complete = frame_offsets(&lens).iter().filter(|&&o| o <= cut).count().saturating_sub(1);
        prop_assert_eq!(&got[..], &written[..complete]);
        let next = log.append_batch(&[b"tail"]).unwrap()[0];
        prop_assert!(got.last().is_none_or(|(s, _)| *s < next));
    }
}

#[test]
fn file_log_meets_the_event_log_contract() {
    crate::store::contract::check_all(&|| {
        let (dir, path) = setup();
        Box::new(move || {
            let _kept = &dir;
            let (log, _) = Log::open_checked(&path).unwrap();
            Box::new(log)
        })
    });
}

#[test]
fn read_from_reports_damage_to_acknowledged_frames() {
    let (_d, path) = setup();
    let (mut log, _) = Log::open(&path).unwrap();
    log.append_batch(&[b"a", b"bb", b"ccc"]).unwrap();
    let len = log.len_bytes();
    flip_byte(&path, len - 1);
    let items: Vec<_> = log.read_from(0).unwrap().collect();
    assert_eq!(items.len(), 3, "two records, then the damage");
    assert!(matches!(items[2], Err(LogError::Corrupt { .. })));
}
