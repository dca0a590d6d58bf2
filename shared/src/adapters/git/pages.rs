//! Keeps a fetched pack's pages out of the resident set. gix maps the pack
//! it indexes and reads (and touches every page of it to index it): a
//! server that does not filter sends every blob of the commit, so without
//! this a 500 MB pack would make a 500 MB resident set, which a Lambda's
//! memory counts. A thread asks the kernel, every few milliseconds, to
//! reclaim the mapped pages of the files under the fetch's scratch folder
//! (`MADV_PAGEOUT`): what was read stays readable (a page is read again
//! from its file when touched again), and only what gix touches between two
//! passes stays resident.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the mapped pages are released.
const EVERY: Duration = Duration::from_millis(10);

/// Releases the pages of the files mapped from under a folder until dropped.
pub(super) struct Pager {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Pager {
    /// Starts releasing the mapped pages of files under `dir`.
    pub(super) fn start(dir: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let folder = dir
            .canonicalize()
            .unwrap_or_else(|_| dir.to_path_buf())
            .to_string_lossy()
            .into_owned();
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("pack-pager".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        release(&folder);
                        std::thread::sleep(EVERY);
                    }
                })
                .ok()
        };
        Self { stop, thread }
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The address ranges mapped from files under `folder` (`/proc/self/maps`).
fn mapped_under(maps: &str, folder: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let path = fields.nth(4)?;
            let inside = path.len() > folder.len()
                && path.starts_with(folder)
                && path.as_bytes()[folder.len()] == b'/';
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (inside && end > start).then_some((start, end - start))
        })
        .collect()
}

fn release(folder: &str) {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    for (start, len) in mapped_under(&maps, folder) {
        page_out(start, len);
    }
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // the one call below; why it is sound is said there
fn page_out(start: usize, len: usize) {
    // SAFETY: `MADV_PAGEOUT` asks the kernel to reclaim the pages of the
    // range and never changes what they hold: a page touched again is read
    // back from its file (or from swap). So the call is sound whatever is
    // mapped at the range by the time it runs, even if gix has unmapped the
    // file and something else was mapped there since; a range no longer
    // mapped fails with ENOMEM, which is ignored. No pointer is
    // dereferenced.
    unsafe {
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_PAGEOUT);
    }
}

#[cfg(not(target_os = "linux"))]
fn page_out(_start: usize, _len: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_files_under_the_folder_are_released() {
        let maps = "\
7f0000000000-7f0000100000 r--s 00000000 08:01 12 /tmp/fetch/objects/pack/pack-1.pack
7f0000200000-7f0000201000 r--s 00000000 08:01 13 /tmp/fetch-other/x.pack
7f0000300000-7f0000400000 rw-p 00000000 00:00 0 [heap]
7f0000500000-7f0000600000 rw-p 00000000 00:00 0
garbage line
";
        assert_eq!(
            mapped_under(maps, "/tmp/fetch"),
            [(0x7f00_0000_0000, 0x10_0000)]
        );
    }

    #[test]
    fn a_pager_stops_when_dropped() {
        let dir = std::env::temp_dir();
        let pager = Pager::start(&dir);
        std::thread::sleep(EVERY * 3);
        drop(pager);
    }
}
