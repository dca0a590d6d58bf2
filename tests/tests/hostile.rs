//! Hostile sources: crafted Git commits and S3 archives, each refused with
//! its own message in the stack's status, before CloudFormation is called;
//! nothing is written outside scratch space (archive entries are never
//! unpacked onto disk). A link inside the source is followed.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use stacksync::asl::Outcome;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::archives::{self, TarEntry, file};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const QUEUE: &[u8] = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n";
const LFS: &[u8] = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";

fn stack_name(prefix: &str) -> String {
    unique_name(prefix).replace('-', "x")
}

/// One crafted source and what its run must say.
struct Case {
    what: &'static str,
    /// `source:` of the entry (flow mapping body).
    source: String,
    reason: StallReason,
    words: String,
}

/// Runs every case through the local runner: each fails, names its
/// problem, and leaves CloudFormation alone.
async fn refused_each_with_its_message(
    h: &Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
    cases: Vec<Case>,
) {
    let cfn = Emulator::shared().cloudformation();
    for case in cases {
        let name = stack_name("hostile");
        h.apply(&format!(
            "stacks:\n  - name: {name}\n    source: {{{}}}\n",
            case.source
        ))
        .await;
        let outcome = h.reconcile(&name).await;
        assert!(
            matches!(&outcome, Outcome::Failed(_)),
            "{}: {outcome:?}",
            case.what
        );
        let status = h.entry(&name).await.status;
        let message = status.message.clone().unwrap_or_default();
        assert_eq!(status.phase, Phase::Failed, "{}", case.what);
        assert_eq!(
            status.stall_reason,
            Some(case.reason),
            "{}: {message}",
            case.what
        );
        assert!(message.contains(&case.words), "{}: {message}", case.what);
        assert!(
            cfn.describe_stacks()
                .stack_name(&name)
                .send()
                .await
                .is_err(),
            "{}: no stack made",
            case.what
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_git_commits_are_refused_each_with_its_own_message() {
    let repo = GitRepo::new("hostile");
    let sub = GitRepo::new("hostile-sub");
    let sub_head = sub.commit(&[("t.yaml", QUEUE)], "sub");
    let url = repo.file_url();
    let mut cases = Vec::new();
    let mut case = |what, commit: String, path: &str, extra: &str, reason, words: &str| {
        cases.push(Case {
            what,
            source: format!("git: '{url}', ref: '{commit}', path: '{path}'{extra}"),
            reason,
            words: words.to_owned(),
        });
    };
    let c = repo.link("t.yaml", "../../../etc/passwd", "link out");
    case(
        "a link out of the source",
        c,
        "t.yaml",
        "",
        StallReason::InvalidSource,
        "is a symbolic link to \"../../../etc/passwd\", which leaves the source",
    );
    repo.link("a.yaml", "b.yaml", "loop a");
    let c = repo.link("b.yaml", "a.yaml", "loop b");
    case(
        "a loop of links",
        c,
        "a.yaml",
        "",
        StallReason::InvalidSource,
        "symbolic links in a row",
    );
    let c = repo.link("abs.yaml", "/etc/passwd", "absolute link");
    case(
        "a link to an absolute path",
        c,
        "abs.yaml",
        "",
        StallReason::InvalidSource,
        "which leaves the source",
    );
    let c = repo.commit(&[("lfs.yaml", LFS)], "lfs");
    case(
        "a Git LFS pointer",
        c,
        "lfs.yaml",
        "",
        StallReason::InvalidSource,
        "lfs.yaml is stored in Git LFS",
    );
    let c = repo.gitlink("vendor", &sub_head, "submodule");
    case(
        "a file in a submodule",
        c,
        "vendor/t.yaml",
        "",
        StallReason::InvalidSource,
        "vendor/t.yaml is in a Git submodule",
    );
    let c = repo.commit(&[("stacks/q.yaml", QUEUE)], "folder");
    case(
        "the template is a folder",
        c,
        "stacks",
        "",
        StallReason::InvalidTemplate,
        "template stacks is a folder, not a file",
    );
    let big = vec![b'#'; 11 * 1024 * 1024];
    let c = repo.commit(&[("big/blob.bin", &big)], "big");
    case(
        "an included file over the limit",
        c,
        "stacks/q.yaml",
        ", include: [big]",
        StallReason::InvalidSource,
        "big/blob.bin is 11534336 bytes, over the limit",
    );
    let c = repo.head();
    case(
        "an included path that is not there",
        c,
        "stacks/q.yaml",
        ", include: [nowhere]",
        StallReason::InvalidTemplate,
        "included path nowhere is not in the source",
    );

    let h = Harness::new("hostile").await;
    refused_each_with_its_message(&h, cases).await;

    // A link that stays inside the source is followed.
    let c = repo.link("t.yaml", "stacks/q.yaml", "link in");
    let name = stack_name("linked");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', ref: '{c}', path: t.yaml}}\n"
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "{outcome:?} {:?}",
        h.entry(&name).await.status.message
    );
}

/// Archives crafted to escape, to exhaust or to deceive: what each is, its
/// extension, its bytes, and the reason and the words its refusal gives.
/// The first one's entry climbs out to `/tmp/ESCAPEE`.
fn crafted_archives(
    escapee: &str,
) -> Vec<(&'static str, &'static str, Vec<u8>, StallReason, String)> {
    let zeros = vec![0u8; 30 * 1024 * 1024];
    let many: Vec<TarEntry> = (0..100_001).map(|i| file(&format!("f/{i}"), b"")).collect();
    let raw = |name: &[u8], body: &[u8]| TarEntry::File(name.to_vec(), body.to_vec());
    vec![
        (
            "a zip entry climbing out",
            "zip",
            archives::zip(&[
                (format!("../../../../../../tmp/{escapee}").as_bytes(), QUEUE),
                (b"t.yaml", QUEUE),
            ]),
            StallReason::InvalidSource,
            "has a `..` in its path".into(),
        ),
        (
            "an absolute tar entry",
            "tgz",
            archives::tar_gz(&[raw(b"/tmp/abs.yaml", QUEUE), file("t.yaml", QUEUE)]),
            StallReason::InvalidSource,
            "\"/tmp/abs.yaml\" is an absolute path".into(),
        ),
        (
            "a device file",
            "tgz",
            archives::tar_gz(&[
                TarEntry::Device(b"dev/null".to_vec()),
                file("t.yaml", QUEUE),
            ]),
            StallReason::InvalidSource,
            "\"dev/null\" is a device file".into(),
        ),
        (
            "a hard link",
            "tgz",
            archives::tar_gz(&[
                file("t.yaml", QUEUE),
                TarEntry::HardLink(b"h.yaml".to_vec(), b"/etc/passwd".to_vec()),
            ]),
            StallReason::InvalidSource,
            "\"h.yaml\" is a hard link".into(),
        ),
        (
            "a tar link out of the archive",
            "tgz",
            archives::tar_gz(&[TarEntry::Link(
                b"t.yaml".to_vec(),
                b"../../etc/passwd".to_vec(),
            )]),
            StallReason::InvalidSource,
            "t.yaml is a symbolic link to \"../../etc/passwd\", which leaves the source".into(),
        ),
        (
            "a zip link out of the archive",
            "zip",
            archives::zip_link("t.yaml", "/etc/passwd"),
            StallReason::InvalidSource,
            "which leaves the source".into(),
        ),
        (
            "a zip bomb",
            "zip",
            archives::zip(&[(b"t.yaml", QUEUE), (b"zeros.bin", &zeros)]),
            StallReason::InvalidSource,
            "\"zeros.bin\" unpacks".into(),
        ),
        (
            "a tar.gz bomb",
            "tgz",
            archives::tar_gz(&[file("zeros.bin", &zeros), file("t.yaml", QUEUE)]),
            StallReason::InvalidSource,
            "(the whole archive)".into(),
        ),
        (
            "a name that is not UTF-8",
            "tgz",
            archives::tar_gz(&[raw(b"caf\xe9.yaml", QUEUE), file("t.yaml", QUEUE)]),
            StallReason::InvalidSource,
            "has a name that is not UTF-8".into(),
        ),
        (
            "too many entries",
            "tgz",
            archives::tar_gz(&many),
            StallReason::InvalidSource,
            "more than 100000 entries".into(),
        ),
        (
            "not an archive",
            "zip",
            b"Resources: {}\n".to_vec(),
            StallReason::InvalidSource,
            "neither a zip nor a gzip signature".into(),
        ),
        (
            "the template is a folder",
            "tgz",
            archives::tar_gz(&[
                TarEntry::Folder(b"t.yaml/".to_vec()),
                file("t.yaml/q.yaml", QUEUE),
            ]),
            StallReason::InvalidTemplate,
            "template t.yaml is a folder".into(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_archives_are_refused_each_with_its_own_message_and_nothing_is_unpacked() {
    let emulator = Emulator::shared();
    let bucket = emulator.source_bucket(false).await;
    let escapee = format!("escaped-{}.yaml", unique_name("x"));
    let mut cases = Vec::new();
    for (what, extension, bytes, reason, words) in crafted_archives(&escapee) {
        let key = format!("{}.{extension}", unique_name("crafted"));
        emulator.put_object(&bucket, &key, bytes).await;
        cases.push(Case {
            what,
            source: format!("s3: 's3://{bucket}/{key}', path: t.yaml"),
            reason,
            words,
        });
    }
    let h = Harness::new("archives").await;
    refused_each_with_its_message(&h, cases).await;
    assert!(
        !std::path::Path::new("/tmp").join(&escapee).exists(),
        "nothing unpacked"
    );
}
