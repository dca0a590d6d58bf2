//! One fetch as the artifact-fetch function makes it, alone in a process so
//! that its wall time and peak memory can be measured (`scripts/bench
//! fetch`): resolve the ref, take the wanted files from the Git source,
//! pack the artifact that would be stored. Prints what would be stored.
//!
//! Usage: fetch_once URL REF TEMPLATE [MORE PATHS…]
//!
//! Also prints the peaks of its anonymous memory (heap, stacks) and of its
//! file-backed memory (mapped files: the pack gix indexes is mapped, and
//! its pages are reclaimable), sampled every 2 ms from /proc/self/status:
//! `/usr/bin/time`'s maximum RSS counts both.
#![allow(clippy::unwrap_used, clippy::print_stdout)] // a measuring tool: fail loudly

use stacksync::adapters::git::GitFetcher;
use stacksync::artifact;
use stacksync::content::{Role, Wanted};
use stacksync::ports::{SourceFetcher, SourceLocation};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, reference, template, more @ ..] = args.as_slice() else {
        eprintln!("usage: fetch_once URL REF TEMPLATE [MORE PATHS…]");
        std::process::exit(2);
    };
    let mut paths = vec![(template.clone(), Role::Template)];
    paths.extend(more.iter().map(|p| (p.clone(), Role::Included)));
    let wanted = Wanted::new(paths);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let peaks = std::sync::Arc::new(std::sync::Mutex::new((0u64, 0u64)));
    let sampler = {
        let peaks = peaks.clone();
        std::thread::spawn(move || {
            loop {
                let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
                let kb = |key: &str| {
                    status
                        .lines()
                        .find(|l| l.starts_with(key))
                        .and_then(|l| l.split_whitespace().nth(1))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                let mut p = peaks.lock().unwrap();
                p.0 = p.0.max(kb("RssAnon:"));
                p.1 = p.1.max(kb("RssFile:") + kb("RssShmem:"));
                drop(p);
                if std::sync::Arc::strong_count(&peaks) == 1 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    runtime.block_on(async {
        let git = GitFetcher::new(std::env::temp_dir().join("stacksync-fetch-once"));
        let source = SourceLocation::public(url.as_str());
        let revision = git.resolve(&source, reference).await.unwrap();
        let files = git.fetch(&source, &revision, &wanted).await.unwrap();
        let packed = artifact::pack(&files).unwrap();
        let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
        print!(
            "{} files, {bytes} bytes, {} bytes stored",
            files.len(),
            packed.len()
        );
    });
    let (anon, file) = *peaks.lock().unwrap();
    drop(peaks);
    sampler.join().unwrap();
    println!(", peak anonymous {anon} KB, peak file-backed {file} KB");
}
