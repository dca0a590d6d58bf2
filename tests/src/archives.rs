//! Archives for S3 sources, good and crafted hostile: entries written as an
//! attacker would, bypassing the checks archive writers make.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

/// One tar entry, as written raw.
#[derive(Debug, Clone)]
pub enum TarEntry {
    File(Vec<u8>, Vec<u8>),
    /// A symbolic link: name, target.
    Link(Vec<u8>, Vec<u8>),
    /// A hard link: name, target.
    HardLink(Vec<u8>, Vec<u8>),
    /// A character device.
    Device(Vec<u8>),
    Folder(Vec<u8>),
}

/// A file entry.
pub fn file(name: &str, content: &[u8]) -> TarEntry {
    TarEntry::File(name.as_bytes().to_vec(), content.to_vec())
}

/// A tar.gz of `entries`, names written into the header as given (no
/// checks: `..`, absolute paths and any bytes pass).
pub fn tar_gz(entries: &[TarEntry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for entry in entries {
        let mut header = tar::Header::new_old();
        header.set_mode(0o644);
        header.set_mtime(0);
        let (name, body, kind, link): (&[u8], &[u8], tar::EntryType, &[u8]) = match entry {
            TarEntry::File(name, body) => (name, body, tar::EntryType::Regular, b""),
            TarEntry::Link(name, target) => (name, b"", tar::EntryType::Symlink, target),
            TarEntry::HardLink(name, target) => (name, b"", tar::EntryType::Link, target),
            TarEntry::Device(name) => (name, b"", tar::EntryType::Char, b""),
            TarEntry::Folder(name) => (name, b"", tar::EntryType::Directory, b""),
        };
        header.set_entry_type(kind);
        header.set_size(body.len() as u64);
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name);
        old.linkname[..link.len()].copy_from_slice(link);
        header.set_cksum();
        builder.append(&header, body).expect("entry written");
    }
    let encoder = builder.into_inner().expect("tar finished");
    encoder.finish().expect("gzip finished")
}

/// A zip of files (name, content), deflated, names as given.
pub fn zip(files: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(false);
    for (name, content) in files {
        writer
            .start_file(String::from_utf8_lossy(name).into_owned(), options)
            .expect("zip entry");
        writer.write_all(content).expect("zip content");
    }
    let mut bytes = writer.finish().expect("zip finished").into_inner();
    // The zip writer keeps names as UTF-8 text: patch raw names in place.
    for (name, _) in files {
        let lossy = String::from_utf8_lossy(name).into_owned();
        if lossy.as_bytes() != *name && lossy.len() == name.len() {
            replace_all(&mut bytes, lossy.as_bytes(), name);
        }
    }
    bytes
}

/// A zip whose one entry is a symbolic link `name` → `target`.
pub fn zip_link(name: &str, target: &str) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    writer
        .add_symlink(name, target, zip::write::SimpleFileOptions::default())
        .expect("zip link");
    writer.finish().expect("zip finished").into_inner()
}

fn replace_all(haystack: &mut [u8], from: &[u8], to: &[u8]) {
    let mut i = 0;
    while i + from.len() <= haystack.len() {
        if &haystack[i..i + from.len()] == from {
            haystack[i..i + from.len()].copy_from_slice(to);
            i += from.len();
        } else {
            i += 1;
        }
    }
}
