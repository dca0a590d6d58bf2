//! Deterministic zip archives: the same files give the same bytes, so the
//! same key. Entries in byte order of their names, no folder entries, every
//! timestamp 1980-01-01 00:00 (zip's earliest), deflated at level 1; mode 0644, or 0755
//! for a file that starts as a program does (`#!`, or an ELF header: a
//! custom runtime's `bootstrap`), since a commit's files are read without
//! their mode.

use std::io::Write;

use zip::write::SimpleFileOptions;

/// The first bytes of a zip archive (a local file header, or an empty one's
/// end of central directory).
pub fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

/// The mode a file gets in an archive.
fn mode(bytes: &[u8]) -> u32 {
    if bytes.starts_with(b"#!") || bytes.starts_with(b"\x7fELF") {
        0o755
    } else {
        0o644
    }
}

/// Zips `files` (name inside the archive, bytes), sorted by name.
pub fn zip(files: &[(&str, &[u8])]) -> Result<Vec<u8>, String> {
    let mut sorted: Vec<&(&str, &[u8])> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in sorted {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            // Deflate's fastest level: four times the speed of the default
            // for a few percent more bytes (measured: BENCHMARKS.md); fixed,
            // so the same files still give the same bytes.
            .compression_level(Some(1))
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(mode(bytes));
        writer
            .start_file(*name, options)
            .map_err(|e| format!("{name}: {e}"))?;
        writer
            .write_all(bytes)
            .map_err(|e| format!("{name}: {e}"))?;
    }
    let cursor = writer.finish().map_err(|e| e.to_string())?;
    Ok(cursor.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_files_in_any_order_give_the_same_bytes() {
        let a = zip(&[("b.js", b"x"), ("a/index.js", b"exports.h = 1")]).unwrap();
        let b = zip(&[("a/index.js", b"exports.h = 1"), ("b.js", b"x")]).unwrap();
        assert_eq!(a, b);
        assert!(is_zip(&a));
        let c = zip(&[("a/index.js", b"exports.h = 2"), ("b.js", b"x")]).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn entries_read_back_in_name_order_with_their_modes() {
        let bytes = zip(&[
            ("z", b"plain"),
            ("bootstrap", b"\x7fELF..."),
            ("run.sh", b"#!/bin/sh"),
        ])
        .unwrap();
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
        let names: Vec<String> = (0..archive.len())
            .map(|i| archive.by_index(i).unwrap().name().unwrap().into_owned())
            .collect();
        assert_eq!(names, ["bootstrap", "run.sh", "z"]);
        let mode = |i: usize, a: &mut zip::ZipArchive<_>| a.by_index(i).unwrap().unix_mode();
        assert_eq!(mode(0, &mut archive).map(|m| m & 0o777), Some(0o755));
        assert_eq!(mode(2, &mut archive).map(|m| m & 0o777), Some(0o644));
    }
}
