//! One template packaged and its objects stored as template-upload does
//! it, alone in a process so that its wall time and peak memory can be
//! measured (`scripts/bench package`): every file of the folder read (as
//! the step reads the run's artifact), the template packaged
//! (`stacksync::package`), each object stored unless there (HEAD; then
//! made again and PUT) in the bucket at the endpoint. Prints the time of each part.
//!
//! Usage: package_once DIR TEMPLATE BUCKET ENDPOINT
#![allow(clippy::unwrap_used, clippy::print_stdout)] // a measuring tool: fail loudly

use std::path::Path;
use std::time::Instant;

use stacksync::adapters::s3::S3Store;
use stacksync::ports::Blobs;

fn read_tree(root: &Path, at: &Path, files: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(at).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_tree(root, &path, files);
        } else {
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            files.push((name, std::fs::read(&path).unwrap()));
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, template, bucket, endpoint] = args.as_slice() else {
        eprintln!("usage: package_once DIR TEMPLATE BUCKET ENDPOINT");
        std::process::exit(2);
    };
    let started = Instant::now();
    let mut files = Vec::new();
    read_tree(Path::new(dir), Path::new(dir), &mut files);
    files.sort();
    let read = started.elapsed();
    let bytes = files
        .iter()
        .find(|(p, _)| p == template)
        .map(|(_, b)| b.clone())
        .unwrap();
    let destination = stacksync::package::Destination {
        bucket: bucket.clone(),
        url_base: format!("{endpoint}/{bucket}"),
        prefix: "templates/".into(),
    };
    let packaged = stacksync::package::package(template, &bytes, files, &destination).unwrap();
    let packed = started.elapsed();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stored = runtime.block_on(async {
        let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(aws_config::Region::new("us-east-1"))
            .load()
            .await;
        let store = S3Store::new(stacksync::adapters::s3_client(&config, true), bucket);
        store.ensure_bucket().await.unwrap();
        let mut stored = 0usize;
        for object in &packaged.objects {
            if !store.exists(&object.key).await.unwrap() {
                let bytes = packaged.bytes(object).unwrap();
                stored += bytes.len();
                store
                    .put_if_absent(&object.key, bytes, object.content_type)
                    .await
                    .unwrap();
            }
        }
        stored
    });
    println!(
        "read {:.3} s, packaged {:.3} s, stored {:.3} s ({} artifacts, {} bytes put, template {} bytes)",
        read.as_secs_f64(),
        (packed - read).as_secs_f64(),
        (started.elapsed() - packed).as_secs_f64(),
        packaged.artifacts.len(),
        stored,
        packaged.template.len()
    );
}
