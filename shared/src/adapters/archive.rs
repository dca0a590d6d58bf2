//! Archives of S3 sources (`.zip`, `.tar.gz`), read from a scratch file as
//! hostile input. Every entry is listed and checked (name, kind, size,
//! compression ratio, count) before anything is read; then only the wanted
//! entries are read, into memory, never onto disk, so no entry name can
//! write anywhere. A tar.gz is one compressed stream: it is metered as it
//! inflates and stopped at the first limit it passes.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use flate2::read::MultiGzDecoder;

use crate::content::{
    ContentError, MAX_ARCHIVE_ENTRIES, MAX_RATIO, MAX_UNPACKED_BYTES, RATIO_FLOOR, Wanted,
    check_file, check_ratio, entry_name,
};
use crate::listing::{Listing, Located, Node};
use crate::ports::source::Files;

/// The kinds of archive an S3 source may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Zip,
    TarGz,
}

impl Format {
    /// By the object's first bytes (its key may say anything).
    pub fn sniff(head: &[u8]) -> Option<Format> {
        match head {
            [b'P', b'K', 3, 4, ..] | [b'P', b'K', 5, 6, ..] => Some(Format::Zip),
            [0x1f, 0x8b, ..] => Some(Format::TarGz),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Zip => "zip",
            Format::TarGz => "tar.gz",
        }
    }
}

/// The wanted files of the archive at `path` (`packed` bytes).
pub fn take(path: &Path, packed: u64, wanted: &Wanted) -> Result<Files, ContentError> {
    let mut head = [0u8; 4];
    let read = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| not_an_archive("zip or tar.gz", e))?;
    match Format::sniff(&head[..read]) {
        Some(Format::Zip) => zip(path, wanted),
        Some(Format::TarGz) => tar_gz(path, packed, wanted),
        None => Err(ContentError::NotAnArchive {
            kind: "zip or tar.gz",
            why: "it starts with neither a zip nor a gzip signature".into(),
        }),
    }
}

fn not_an_archive(kind: &'static str, e: impl std::fmt::Display) -> ContentError {
    ContentError::NotAnArchive {
        kind,
        why: e.to_string(),
    }
}

/// Reads the located entries' bytes, each no longer than listed.
fn checked(located: &Located, bytes: Vec<u8>) -> Result<(String, Vec<u8>), ContentError> {
    if bytes.len() as u64 > located.size {
        return Err(ContentError::UnsafeEntry {
            entry: located.entry.clone(),
            why: "holds more bytes than its header says",
        });
    }
    check_file(&located.name, &bytes)?;
    Ok((located.name.clone(), bytes))
}

/// Unix file types in a zip entry's mode that are not files, folders or links.
fn special_kind(mode: u32) -> Option<&'static str> {
    match mode & 0o170000 {
        0o020000 | 0o060000 => Some("is a device file"),
        0o010000 => Some("is a FIFO"),
        0o140000 => Some("is a socket"),
        _ => None,
    }
}

fn zip(path: &Path, wanted: &Wanted) -> Result<Files, ContentError> {
    let bad = |e: zip::result::ZipError| not_an_archive("zip", e);
    let file = BufReader::new(File::open(path).map_err(|e| not_an_archive("zip", e))?);
    let mut archive = zip::ZipArchive::new(file).map_err(bad)?;
    if archive.len() > MAX_ARCHIVE_ENTRIES {
        return Err(ContentError::TooManyEntries {
            limit: MAX_ARCHIVE_ENTRIES,
        });
    }
    let mut listing = Listing::default();
    let mut index = BTreeMap::new();
    let mut total: u64 = 0;
    for i in 0..archive.len() {
        let entry = archive.by_index_raw(i).map_err(bad)?;
        let name = entry_name(entry.name_raw())?;
        if let Some(why) = entry.unix_mode().and_then(special_kind) {
            return Err(ContentError::UnsafeEntry { entry: name, why });
        }
        check_ratio(&name, entry.compressed_size(), entry.size())?;
        total = total.saturating_add(entry.size());
        if total > MAX_UNPACKED_BYTES {
            return Err(ContentError::UnpacksTooLarge {
                limit: MAX_UNPACKED_BYTES,
            });
        }
        let node = if entry.is_dir() {
            Node::Folder
        } else if entry.is_symlink() {
            // The target is the entry's content: stored, not compressed, in practice.
            let mut target = Vec::new();
            drop(entry);
            archive
                .by_index(i)
                .map_err(bad)?
                .take(4096)
                .read_to_end(&mut target)
                .map_err(|e| not_an_archive("zip", e))?;
            Node::Link(target)
        } else {
            Node::File { size: entry.size() }
        };
        index.insert(name.clone(), i);
        listing.add(name, node);
    }
    let mut files = Vec::new();
    for located in listing.locate(wanted)? {
        let i = index[&located.entry];
        let mut bytes = Vec::new();
        archive
            .by_index(i)
            .map_err(bad)?
            .take(located.size + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| not_an_archive("zip", e))?;
        files.push(checked(&located, bytes)?);
    }
    files.sort();
    Ok(files)
}

/// Why the metered stream stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    TooLarge,
    Ratio,
}

/// Counts what a decoder gives and stops it at the first limit it passes.
struct Meter<R> {
    inner: R,
    packed: u64,
    unpacked: u64,
    stopped: Rc<Cell<Option<Stop>>>,
}

impl<R: Read> Read for Meter<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.unpacked += n as u64;
        let stop = if self.unpacked > MAX_UNPACKED_BYTES {
            Some(Stop::TooLarge)
        } else if self.unpacked > RATIO_FLOOR && self.unpacked / self.packed.max(1) > MAX_RATIO {
            Some(Stop::Ratio)
        } else {
            None
        };
        if let Some(stop) = stop {
            self.stopped.set(Some(stop));
            return Err(std::io::Error::other("archive limit passed"));
        }
        Ok(n)
    }
}

/// One pass over a tar.gz: every entry checked; `visit` sees each with its
/// name and node, and the reader of its content.
fn scan_tar(
    path: &Path,
    packed: u64,
    mut visit: impl FnMut(&str, &Node, &mut dyn Read) -> Result<(), ContentError>,
) -> Result<(), ContentError> {
    let stopped = Rc::new(Cell::new(None));
    let file = File::open(path).map_err(|e| not_an_archive("tar.gz", e))?;
    let meter = Meter {
        inner: MultiGzDecoder::new(BufReader::new(file)),
        packed,
        unpacked: 0,
        stopped: stopped.clone(),
    };
    let mut archive = tar::Archive::new(meter);
    let fail = |e: std::io::Error| match stopped.get() {
        Some(Stop::TooLarge) => ContentError::UnpacksTooLarge {
            limit: MAX_UNPACKED_BYTES,
        },
        Some(Stop::Ratio) => ContentError::Bomb {
            entry: "(the whole archive)".into(),
            ratio: MAX_RATIO + 1,
        },
        None => not_an_archive("tar.gz", e),
    };
    let entries = archive.entries().map_err(fail)?;
    for (count, entry) in entries.enumerate() {
        if count >= MAX_ARCHIVE_ENTRIES {
            return Err(ContentError::TooManyEntries {
                limit: MAX_ARCHIVE_ENTRIES,
            });
        }
        let mut entry = entry.map_err(fail)?;
        let name = entry_name(&entry.path_bytes())?;
        let unsafe_entry = |why| ContentError::UnsafeEntry {
            entry: name.clone(),
            why,
        };
        use tar::EntryType as T;
        let node = match entry.header().entry_type() {
            T::Regular | T::Continuous | T::GNUSparse => Node::File { size: entry.size() },
            T::Directory => Node::Folder,
            T::Symlink => Node::Link(
                entry
                    .link_name_bytes()
                    .map(|b| b.into_owned())
                    .unwrap_or_default(),
            ),
            T::Link => return Err(unsafe_entry("is a hard link")),
            T::Char | T::Block => return Err(unsafe_entry("is a device file")),
            T::Fifo => return Err(unsafe_entry("is a FIFO")),
            _ => continue, // pax and GNU headers: read by the tar crate itself
        };
        visit(&name, &node, &mut entry)?;
        // The rest of the entry is skipped by the tar crate: still metered.
    }
    Ok(())
}

fn tar_gz(path: &Path, packed: u64, wanted: &Wanted) -> Result<Files, ContentError> {
    let mut listing = Listing::default();
    scan_tar(path, packed, |name, node, _| {
        listing.add(name.to_owned(), node.clone());
        Ok(())
    })?;
    let located = listing.locate(wanted)?;
    let wanted_entries: BTreeSet<&str> = located.iter().map(|l| l.entry.as_str()).collect();
    let mut read: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    scan_tar(path, packed, |name, node, content| {
        if let (Node::File { size }, true) = (node, wanted_entries.contains(name)) {
            let mut bytes = Vec::new();
            content
                .take(size + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| not_an_archive("tar.gz", e))?;
            read.insert(name.to_owned(), bytes);
        }
        Ok(())
    })?;
    let mut files = Vec::new();
    for l in &located {
        let bytes = read.get(&l.entry).cloned().unwrap_or_default();
        files.push(checked(l, bytes)?);
    }
    files.sort();
    Ok(files)
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
