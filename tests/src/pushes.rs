//! Signed GitHub pushes, as the webhook benchmarks send them.

use serde_json::json;
use stacksync::triggers::webhook::Headers;
use stacksync::triggers::webhook::verify::sign;

/// The secret the benchmarks' webhooks accept.
pub const BENCH_SECRET: &[u8] = b"bench-secret";

/// A push of commit `i + 1` to `acme/REPO`'s main branch, signed with
/// [`BENCH_SECRET`], its delivery id `DELIVERY-REPO-i`.
pub fn github_push(i: usize, repo: &str, delivery: &str) -> (Headers, Vec<u8>) {
    let body = json!({
        "ref": "refs/heads/main",
        "after": format!("{:040x}", i + 1),
        "deleted": false,
        "head_commit": {"id": format!("{:040x}", i + 1)},
        "repository": {
            "full_name": format!("acme/{repo}"),
            "clone_url": format!("https://github.com/acme/{repo}.git"),
            "ssh_url": format!("git@github.com:acme/{repo}.git"),
            "html_url": format!("https://github.com/acme/{repo}")
        }
    });
    let raw = serde_json::to_vec(&body).expect("json");
    let mut headers = Headers::new();
    headers.insert("X-GitHub-Event", "push");
    headers.insert("X-GitHub-Delivery", format!("{delivery}-{repo}-{i}"));
    headers.insert("Content-Type", "application/json");
    headers.insert("X-Hub-Signature-256", sign(BENCH_SECRET, &raw));
    (headers, raw)
}
