//! What a source that will not let stacksync in is said as, against the
//! emulator and servers on 127.0.0.1: a Git server refusing a password or a
//! GitHub App's token, or asking for credentials an entry has none of; a 403;
//! GitHub's token endpoint or S3 refusing with no message; an SSH server
//! that will not serve the repository; a SHA-256 repository. Each message
//! names the secret refused and the HTTP status, never gix's words for a
//! credential helper that gave up, and a refusal is tried again only as the
//! README says.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use stacksync::adapters::git::GitFetcher;
use stacksync::adapters::s3_source::S3Archives;
use stacksync::asl::Outcome;
use stacksync::ports::{FetchError, SourceFetcher, SourceLocation};
use stacksync::status::StallReason;
use stacksync::wiring::sdk_sources;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::{App, Config, GitHttpServer};
use stacksync_testkit::private_sources::{QUEUE, entry, private_repo, ready, stack_name};
use stacksync_testkit::sshd::Sshd;
use stacksync_testkit::{Emulator, unique_name};

/// A server on 127.0.0.1 that answers every request with `status` and an
/// empty body, as a forge, S3 or GitHub's API may answer a caller it will
/// not let in: its root URL. It serves until the test process ends.
fn answering(status: &'static str) -> String {
    use std::io::{BufRead, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let root = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(&stream);
            let (mut line, mut length) = (String::new(), 0usize);
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = n.trim().parse().unwrap_or(0);
                }
            }
            let _ = reader.read_exact(&mut vec![0; length]);
            let _ = (&stream).write_all(
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            );
        }
    });
    root
}

/// A fetcher of Git and S3 sources reading secrets from the emulator.
fn emulator_sources(prefix: &str) -> stacksync::adapters::sources::Sources {
    sdk_sources(
        &Emulator::shared().sdk_config(),
        true,
        &std::env::temp_dir().join(unique_name(prefix)),
    )
}

/// Issue "A wrong token is described as a missing one": a password the
/// server refused was told with gix's words for a credential helper that
/// returned nothing ("No credentials were returned at all as if the
/// credential helper isn't functioning unknowingly"), the same as with no
/// secret at all, and then `(attempt 1 of 5 …; next try in …)` while the
/// README said such a failure is not retried. Now the message names the
/// secret and the HTTP status, and the run is tried again with backoff, up
/// to `maxAttempts`, as the README says: the secret is read afresh, so a
/// mended one is used at the next try (here, a reconcile without --force).
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_password_names_its_secret_and_the_http_status_and_is_tried_again_as_the_readme_says()
 {
    let (repo, server) = private_repo(
        "refused",
        Config {
            accounts: vec![("deploy".into(), "the-right-one".into())],
            ..Config::default()
        },
    );
    let wrong = unique_name("wrong-pw");
    let value = |password: &str| {
        serde_json::json!({"username": "deploy", "password": password, "hosts": ["127.0.0.1"]})
            .to_string()
    };
    let emulator = Emulator::shared();
    let secret = emulator.put_secret("git-password", &value(&wrong)).await;
    let h = Harness::new("refused").await;
    let name = stack_name("refused");
    let url = server.url(&repo);
    h.apply(&entry(&name, &url, &secret)).await;

    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let status = h.entry(&name).await.status;
    let message = status.message.clone().unwrap_or_default();
    assert_eq!(
        status.stall_reason,
        Some(StallReason::AuthenticationFailed),
        "{message}"
    );
    assert!(
        message.starts_with(&format!(
            "authentication failed for {url}: the server refused the credentials from {secret} \
             (HTTP 401)"
        )),
        "{message}"
    );
    assert!(
        !message.contains("No credentials were returned"),
        "{message}"
    );
    assert!(!message.contains(&wrong), "the password shows: {message}");
    // Tried again with backoff, counted towards maxAttempts (README:
    // `maxAttempts`, "Private repositories").
    assert!(
        message.contains(" (attempt 1 of 5 at ") && message.contains("; next try in "),
        "{message}"
    );
    let failures = status.run.failures.clone().unwrap();
    assert_eq!((failures.count, failures.gave_up), (1, false));
    assert!(status.times.next_reconcile_at.is_some(), "{status:?}");

    // The secret mended: the next try (no --force) reads it again and syncs.
    aws_sdk_secretsmanager::Client::new(&emulator.sdk_config())
        .put_secret_value()
        .secret_id(&secret)
        .secret_string(value("the-right-one"))
        .send()
        .await
        .unwrap();
    let outcome = h.reconcile(&name).await;
    let status = h.entry(&name).await.status;
    assert!(ready(&outcome), "{outcome:?} {:?}", status.message);
    assert_eq!(status.applied.last_applied_revision, Some(repo.head()));
}

/// The same server asked by an entry without `credentialsSecret`: it is
/// told that credentials are needed and where they go, never gix's words
/// for a credential helper that gave up.
#[tokio::test(flavor = "multi_thread")]
async fn a_server_asking_for_credentials_an_entry_has_none_of_is_told_to_set_a_secret() {
    let (repo, server) = private_repo(
        "nosecret",
        Config {
            accounts: vec![("deploy".into(), "pass-word".into())],
            ..Config::default()
        },
    );
    let url = server.url(&repo);
    let err = emulator_sources("nosecret")
        .resolve(&SourceLocation::public(&url), "main")
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Authentication { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "authentication failed for {url}: the server asks for credentials (HTTP 401), and \
             the entry has none: set source.credentialsSecret (README: Private repositories)"
        )
    );
}

/// A GitHub App's installation token that the Git server refuses (the app
/// lacks access to the repository) is said refused, naming the secret it
/// was made from: not missing.
#[tokio::test(flavor = "multi_thread")]
async fn a_github_app_token_the_git_server_refuses_is_said_refused_naming_its_secret() {
    let (app, key) = App::generate("4242", "77", &unique_name("ghs"));
    let api = GitHttpServer::serve(
        &std::env::temp_dir(),
        Config {
            app: Some(app),
            ..Config::default()
        },
    );
    let (repo, server) = private_repo(
        "apprefused",
        Config {
            accounts: vec![("x-access-token".into(), "another-token".into())],
            ..Config::default()
        },
    );
    let secret = Emulator::shared()
        .put_secret(
            "git-app",
            &serde_json::json!({
                "appId": 4242, "installationId": 77, "privateKey": key,
                "apiUrl": api.api_url(), "hosts": ["127.0.0.1"],
            })
            .to_string(),
        )
        .await;
    let url = server.url(&repo);
    let err = emulator_sources("apprefused")
        .resolve(
            &SourceLocation {
                url: url.clone(),
                credentials: Some(secret.clone()),
            },
            "main",
        )
        .await
        .unwrap_err();
    assert_eq!(api.seen().tokens_issued, 1);
    assert!(matches!(err, FetchError::Authentication { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "authentication failed for {url}: the server refused the credentials from {secret} \
             (HTTP 401)"
        )
    );
}

/// A server that answers 403 Forbidden: the status is said, and whose
/// credentials it refused (or that the entry has none).
#[tokio::test(flavor = "multi_thread")]
async fn a_forbidden_answer_says_403_and_whose_credentials_it_refused() {
    let url = format!("{}/acme/infra.git", answering("403 Forbidden"));
    let secret = Emulator::shared()
        .put_secret(
            "git-forbidden",
            r#"{"token": "t0ken", "username": "ci-bot", "hosts": ["127.0.0.1"]}"#,
        )
        .await;
    let sources = emulator_sources("forbidden");
    let with = sources
        .resolve(
            &SourceLocation {
                url: url.clone(),
                credentials: Some(secret.clone()),
            },
            "main",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(with, FetchError::Authentication { .. }),
        "{with:?}"
    );
    assert_eq!(
        with.to_string(),
        format!(
            "authentication failed for {url}: the server refused the credentials from {secret} \
             (HTTP 403)"
        )
    );
    let without = sources
        .resolve(&SourceLocation::public(&url), "main")
        .await
        .unwrap_err();
    assert!(
        matches!(without, FetchError::Authentication { .. }),
        "{without:?}"
    );
    assert_eq!(
        without.to_string(),
        format!(
            "authentication failed for {url}: the server refused access (HTTP 403), and the \
             entry has no credentials: set source.credentialsSecret if the repository is private"
        )
    );
}

/// GitHub's token endpoint refusing with no message in its answer: the
/// status says it, with no empty cause after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_github_app_token_request_refused_without_a_message_leaves_no_empty_cause() {
    let (_, key) = App::generate("4242", "77", "ghs_unused");
    let api = format!("{}/api/v3", answering("404 Not Found"));
    let secret = Emulator::shared()
        .put_secret(
            "git-app",
            &serde_json::json!({
                "appId": 4242, "installationId": 77, "privateKey": key,
                "apiUrl": api, "hosts": ["127.0.0.1"],
            })
            .to_string(),
        )
        .await;
    let url = "http://127.0.0.1:9/acme/infra.git".to_owned();
    let err = emulator_sources("appempty")
        .resolve(
            &SourceLocation {
                url: url.clone(),
                credentials: Some(secret),
            },
            "main",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Authentication { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "authentication failed for {url}: GitHub refused the app's token request for \
             installation 77 (HTTP 404 Not Found)"
        )
    );
}

/// S3 refusing the role a source object (HTTP 403 to `HeadObject`, which
/// has no body to say why): said as a refusal of access, never as an empty
/// cause or an endpoint that may not implement `HeadObject`.
#[tokio::test(flavor = "multi_thread")]
async fn an_s3_source_the_role_may_not_read_is_said_refused_access() {
    let endpoint = answering("403 Forbidden");
    let config = aws_sdk_s3::config::Builder::from(&Emulator::shared().sdk_config())
        .endpoint_url(&endpoint)
        .force_path_style(true)
        .build();
    let archives = S3Archives::new(
        aws_sdk_s3::Client::from_conf(config),
        std::env::temp_dir().join(unique_name("s3forbidden")),
    );
    let url = "s3://private-bucket/app/template.zip";
    let err = archives
        .resolve(&SourceLocation::public(url), "")
        .await
        .unwrap_err();
    let said = err.to_string();
    assert!(
        matches!(
            err,
            FetchError::Port(stacksync::ports::PortError::Refused(_))
        ),
        "{err:?}"
    );
    assert_eq!(
        said,
        format!(
            "{url}: HeadObject: S3 refused access (HTTP 403 Forbidden): the functions' role may \
             read only the buckets in SourceBucketNames (a local run: your AWS credentials)"
        )
    );
}

/// A deploy key the SSH server lets in, for a repository it will not serve
/// (GitHub: a deploy key of another repository, "Repository not found"):
/// `git-upload-pack` ends at once with its reason on stderr. That reason
/// was dropped, and the run told "failed to fill whole buffer", retried as
/// if the network had failed (and never given up); now it is said, and the
/// failure counts towards `maxAttempts` as a refused source does.
#[tokio::test(flavor = "multi_thread")]
async fn an_ssh_server_that_will_not_serve_the_repository_says_why_and_is_no_network_failure() {
    use stacksync::ports::PortError;
    let sshd = Sshd::start();
    let repo = GitRepo::new("sshgone");
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let url = sshd.url(&repo).replace("/repo.git", "/not-there.git");
    let arn = Emulator::shared()
        .put_secret(
            "git-ssh",
            &serde_json::json!({"sshPrivateKey": sshd.deploy_key,
                "knownHosts": sshd.known_hosts, "hosts": ["127.0.0.1"]})
            .to_string(),
        )
        .await;
    let err = emulator_sources("sshgone")
        .resolve(
            &SourceLocation {
                url: url.clone(),
                credentials: Some(arn),
            },
            "main",
        )
        .await
        .unwrap_err();
    let said = err.to_string();
    assert!(
        matches!(&err, FetchError::Port(PortError::Refused(_))),
        "{err:?}"
    );
    assert!(
        said.starts_with(&format!(
            "{url}: the server's git-upload-pack ended with exit status 128: fatal: "
        )) && said.contains("does not appear to be a git repository")
            && !said.contains("failed to fill whole buffer"),
        "{said}"
    );
}

/// Issue "Real payloads and real templates" (6): a SHA-256 repository was
/// fetched as if it were a network failure (`Could not decode object ID: A
/// hash sized 64 hexadecimal characters is invalid`), retried until
/// `RetriesExhausted`. It is said for what it is, once: stacksync reads
/// SHA-1 repositories only.
#[tokio::test(flavor = "multi_thread")]
async fn a_sha256_repository_is_refused_for_what_it_is_not_retried() {
    let repo = GitRepo::new_sha256("sha256");
    let head = repo.commit(&[("t.yaml", b"Resources: {}\n")], "sha256");
    assert_eq!(head.len(), 64, "a SHA-256 repository: {head}");
    let git = GitFetcher::new(std::env::temp_dir().join(unique_name("sha256")));
    let err = git
        .resolve(&SourceLocation::public(repo.file_url()), "main")
        .await
        .unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
    let said = err.to_string();
    assert!(said.contains("SHA-256") && said.contains("SHA-1"), "{said}");
}
