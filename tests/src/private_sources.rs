//! What the tests of private and S3 sources share (`tests/tests/sources.rs`,
//! `source_refusals.rs`, `scheduler.rs`): the templates, a stacks file entry
//! with a credentials secret, a private repository served over HTTP.

use stacksync::asl::Outcome;

use crate::git::GitRepo;
use crate::http::{Config, GitHttpServer};
use crate::{Emulator, archives, unique_name};

/// One queue.
pub const QUEUE: &[u8] = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n";
/// Two queues: the template of a new revision.
pub const TWO_QUEUES: &[u8] =
    b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n  Second: {Type: AWS::SQS::Queue}\n";

/// A stack name of its own, in the characters every test's names allow.
pub fn stack_name(prefix: &str) -> String {
    unique_name(prefix).replace('-', "x")
}

/// A stacks file of one entry following `url` with `secret`.
pub fn entry(name: &str, url: &str, secret: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: t.yaml, credentialsSecret: '{secret}'}}\n"
    )
}

/// A repository with the queue template, and a server that requires `config`.
pub fn private_repo(prefix: &str, config: Config) -> (GitRepo, GitHttpServer) {
    let repo = GitRepo::new(prefix);
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let server = GitHttpServer::serve_repo(&repo, config);
    (repo, server)
}

/// Whether a run succeeded.
pub fn ready(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Succeeded(_))
}

/// A template in an archive, as a zip or a tar.gz.
pub fn archive(format: &str, template: &[u8]) -> Vec<u8> {
    match format {
        "zip" => archives::zip(&[(b"stacks/t.yaml", template), (b"README.md", b"hello")]),
        _ => archives::tar_gz(&[
            archives::file("stacks/t.yaml", template),
            archives::file("README.md", b"hello"),
        ]),
    }
}

/// How many resources the emulator's stack `stack` has (0: no stack).
pub async fn queue_count(stack: &str) -> usize {
    Emulator::shared()
        .cloudformation()
        .describe_stack_resources()
        .stack_name(stack)
        .send()
        .await
        .map(|r| r.stack_resources().len())
        .unwrap_or(0)
}
