//! Artifacts: a source's files at one revision, as one gzipped tar in S3.
//!
//! Files are read by name straight from the compressed stream, never written
//! to disk, so hostile entry names (`../x`, absolute paths, symlinks) cannot
//! escape anything; the decompressed size is bounded against archive bombs.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

/// Most bytes read out of one artifact (decompressed), whatever it claims.
pub const MAX_UNPACKED_BYTES: u64 = 256 * 1024 * 1024;

/// Why an artifact could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    #[error("the artifact is not a readable tar.gz archive: {0}")]
    Corrupt(String),
    #[error("the artifact unpacks to more than {limit} bytes")]
    TooLarge { limit: u64 },
}

/// Packs files (path, bytes) into a gzipped tar, in the order given.
pub fn pack(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, ArtifactError> {
    let corrupt = |e: std::io::Error| ArtifactError::Corrupt(e.to_string());
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for (path, bytes) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, path, bytes.as_slice())
            .map_err(corrupt)?;
    }
    let mut encoder = builder.into_inner().map_err(corrupt)?;
    encoder.flush().map_err(corrupt)?;
    encoder.finish().map_err(corrupt)
}

/// `./a//b` → `a/b`: the form entry names and requested paths are compared in.
fn normal(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Reads one regular file out of an artifact: `Ok(None)` when it is not
/// there, else its bytes — at most `max_file + 1` of them, so a caller that
/// gets more than `max_file` knows the file is over its limit without the
/// whole file ever being held in memory.
pub fn read_file(
    archive: &[u8],
    path: &str,
    max_file: u64,
) -> Result<Option<Vec<u8>>, ArtifactError> {
    let wanted = normal(path);
    let limited = GzDecoder::new(archive).take(MAX_UNPACKED_BYTES + 1);
    let mut reader = tar::Archive::new(limited);
    let entries = reader
        .entries()
        .map_err(|e| ArtifactError::Corrupt(e.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|e| classify(&e))?;
        let name = entry
            .path()
            .map(|p| normal(&p.to_string_lossy()))
            .map_err(|e| ArtifactError::Corrupt(e.to_string()))?;
        if name != wanted || entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let mut bytes = Vec::new();
        entry
            .take(max_file + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| classify(&e))?;
        return Ok(Some(bytes));
    }
    Ok(None)
}

/// Every regular file of an artifact, in its order, within `max_total`
/// bytes in all (a rule set: small files, all of them read).
pub fn read_all(archive: &[u8], max_total: u64) -> Result<Vec<(String, Vec<u8>)>, ArtifactError> {
    let limited = GzDecoder::new(archive).take(MAX_UNPACKED_BYTES + 1);
    let mut reader = tar::Archive::new(limited);
    let entries = reader
        .entries()
        .map_err(|e| ArtifactError::Corrupt(e.to_string()))?;
    let mut files = Vec::new();
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| classify(&e))?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let name = entry
            .path()
            .map(|p| normal(&p.to_string_lossy()))
            .map_err(|e| ArtifactError::Corrupt(e.to_string()))?;
        let mut bytes = Vec::new();
        entry
            .take(max_total - total + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| classify(&e))?;
        total += bytes.len() as u64;
        if total > max_total {
            return Err(ArtifactError::TooLarge { limit: max_total });
        }
        files.push((name, bytes));
    }
    Ok(files)
}

fn classify(e: &std::io::Error) -> ArtifactError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        // `take` ran out: either a truncated archive or one over the bound.
        ArtifactError::TooLarge {
            limit: MAX_UNPACKED_BYTES,
        }
    } else {
        ArtifactError::Corrupt(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<(String, Vec<u8>)> {
        vec![
            ("README.md".into(), b"hello".to_vec()),
            ("stacks/queue.yaml".into(), b"Resources: {}\n".to_vec()),
        ]
    }

    #[test]
    fn every_file_comes_back_in_order_within_a_bound() {
        let archive = pack(&files()).unwrap();
        assert_eq!(read_all(&archive, 1024).unwrap(), files());
        assert!(matches!(
            read_all(&archive, 10),
            Err(ArtifactError::TooLarge { limit: 10 })
        ));
        let garbage = read_all(b"not gzip", 1024);
        assert!(garbage.is_err(), "{garbage:?}");
    }

    #[test]
    fn files_come_back_by_path() {
        let archive = pack(&files()).unwrap();
        assert_eq!(
            read_file(&archive, "stacks/queue.yaml", 100)
                .unwrap()
                .unwrap(),
            b"Resources: {}\n"
        );
        assert_eq!(
            read_file(&archive, "./stacks//queue.yaml", 100)
                .unwrap()
                .unwrap(),
            b"Resources: {}\n"
        );
        assert_eq!(
            read_file(&archive, "stacks/missing.yaml", 100).unwrap(),
            None
        );
        assert_eq!(read_file(&archive, "stacks", 100).unwrap(), None);
    }

    #[test]
    fn a_big_file_is_cut_one_byte_past_the_limit() {
        let archive = pack(&[("big".into(), vec![b'x'; 1000])]).unwrap();
        assert_eq!(read_file(&archive, "big", 10).unwrap().unwrap().len(), 11);
    }

    #[test]
    fn garbage_is_reported_not_panicked_on() {
        assert!(matches!(
            read_file(b"not an archive", "a", 10),
            Err(ArtifactError::Corrupt(_))
        ));
        let archive = pack(&files()).unwrap();
        let truncated = &archive[..archive.len() / 2];
        assert!(read_file(truncated, "stacks/queue.yaml", 100).is_err());
    }
}
