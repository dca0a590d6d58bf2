//! Private sources, end to end through the local runner against the
//! emulator: Git over smart HTTP on 127.0.0.1 that requires credentials
//! (from Secrets Manager and SSM, as tokens, passwords, or a GitHub App's
//! installation tokens), CodeCommit signed with the role's own keys, and
//! what a refused credential leaves behind: a status that names the secret
//! refused, no retries within the run (the next try after the backoff, up
//! to `maxAttempts`), and the secret nowhere. What each kind of refusal is
//! said as: `source_refusals.rs`; the scheduler's reads of private and S3
//! sources: `scheduler.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use stacksync::adapters::credentials::Credentials;
use stacksync::adapters::git::{GitFetcher, Timeouts};
use stacksync::asl::{Outcome, Progress};
use stacksync::content::{Role, Wanted};
use stacksync::ports::{FetchError, SourceFetcher, SourceLocation};
use stacksync::status::{Phase, StallReason};
use stacksync::wiring::sdk_sources;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::git::signing_key;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::{App, Config, GitHttpServer};
use stacksync_testkit::iam::as_function;
use stacksync_testkit::iam::record::record_call;
use stacksync_testkit::listener::Listener;
use stacksync_testkit::private_sources::{
    QUEUE, TWO_QUEUES, archive, entry, private_repo, queue_count, ready, stack_name,
};
use stacksync_testkit::sshd::Sshd;
use stacksync_testkit::{Emulator, logs, unique_name};

#[tokio::test(flavor = "multi_thread")]
async fn private_repositories_are_synced_with_a_token_or_a_password_from_secrets_manager_or_ssm() {
    let token = unique_name("tok");
    let (repo, server) = private_repo(
        "private",
        Config {
            accounts: vec![
                ("ci-bot".into(), token.clone()),
                ("deploy".into(), "pass-word".into()),
            ],
            ..Config::default()
        },
    );
    let emulator = Emulator::shared();
    let token_secret = emulator
        .put_secret(
            "git-token",
            &format!(r#"{{"token": "{token}", "username": "ci-bot", "hosts": ["127.0.0.1"]}}"#),
        )
        .await;
    let password_parameter = emulator
        .put_parameter(
            "git-password",
            r#"{"username": "deploy", "password": "pass-word", "hosts": ["127.0.0.1"]}"#,
        )
        .await;
    let h = Harness::new("private").await;
    let (a, b) = (stack_name("tok"), stack_name("pw"));
    let url = server.url(&repo);
    h.apply(&format!(
        "{}{}",
        entry(&a, &url, &token_secret),
        entry(&b, &url, &password_parameter).trim_start_matches("stacks:\n")
    ))
    .await;
    for name in [&a, &b] {
        let outcome = h.reconcile(name).await;
        let status = h.entry(name).await.status;
        assert!(ready(&outcome), "{name}: {outcome:?} {:?}", status.message);
        assert_eq!(status.phase, Phase::Ready);
        assert_eq!(status.applied.last_applied_revision, Some(repo.head()));
    }
    assert_eq!(
        server.seen().refused,
        0,
        "credentials sent up front, never refused"
    );

    // The same repository without credentials: refused, and said so.
    let anonymous = stack_name("anon");
    h.apply(&format!(
        "stacks:\n  - name: {anonymous}\n    source: {{git: '{url}', path: t.yaml}}\n"
    ))
    .await;
    assert!(matches!(h.reconcile(&anonymous).await, Outcome::Failed(_)));
    let status = h.entry(&anonymous).await.status;
    assert_eq!(
        status.stall_reason,
        Some(StallReason::AuthenticationFailed),
        "{:?}",
        status.message
    );
    assert_eq!(server.seen().refused, 1, "{:?}", server.seen());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_fails_once_saying_authentication_failed_and_the_secret_shows_nowhere() {
    let logs = logs::capture();
    let (repo, server) = private_repo(
        "wrong",
        Config {
            accounts: vec![("ci-bot".into(), "the-right-one".into())],
            ..Config::default()
        },
    );
    let wrong = format!("wrong-{}", unique_name("tok"));
    let secret = Emulator::shared()
        .put_secret(
            "git-token",
            &format!(r#"{{"token": "{wrong}", "username": "ci-bot", "hosts": ["127.0.0.1"]}}"#),
        )
        .await;
    let h = Harness::new("wrong").await;
    let name = stack_name("w");
    let url = server.url(&repo);
    h.apply(&entry(&name, &url, &secret)).await;

    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Failed);
    assert_eq!(
        entry.status.stall_reason,
        Some(StallReason::AuthenticationFailed)
    );
    let message = entry.status.message.clone().unwrap_or_default();
    assert!(
        message.contains(&format!("authentication failed for {url}")),
        "{message}"
    );

    let retries = h
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| {
            matches!(
                e,
                Progress::TaskFailed {
                    retry_in: Some(_),
                    ..
                }
            )
        })
        .count();
    assert_eq!(
        retries, 0,
        "a refused credential is not retried within the run"
    );
    assert!(server.seen().refused <= 2, "{:?}", server.seen());

    // The secret in no log line, status, error, or state of the execution.
    let everywhere = [
        logs.text(),
        format!("{outcome:?}"),
        format!("{:?}", h.events.lock().unwrap()),
        serde_json::to_string(&entry).unwrap(),
        format!("{entry:?}"),
    ];
    for (i, text) in everywhere.iter().enumerate() {
        assert!(!text.contains(&wrong), "place {i} shows the secret");
    }
    assert!(
        logs.text().contains("authentication failed"),
        "the failure is logged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_github_app_gets_an_installation_token_once_and_reuses_it_until_it_expires() {
    let token = unique_name("ghs");
    let (app, key) = App::generate("4242", "77", &token);
    let (repo, server) = private_repo(
        "app",
        Config {
            app: Some(app),
            ..Config::default()
        },
    );
    let secret = |installation: &str| {
        serde_json::json!({
            "appId": 4242, "installationId": installation, "privateKey": key,
            "apiUrl": server.api_url(), "hosts": ["127.0.0.1"],
        })
        .to_string()
    };
    let emulator = Emulator::shared();
    let good = emulator.put_secret("git-app", &secret("77")).await;
    let unknown = emulator.put_secret("git-app", &secret("999")).await;
    let h = Harness::new("app").await;
    let (a, b) = (stack_name("app"), stack_name("noinst"));
    let url = server.url(&repo);
    h.apply(&format!(
        "{}{}",
        entry(&a, &url, &good),
        entry(&b, &url, &unknown).trim_start_matches("stacks:\n")
    ))
    .await;

    let outcome = h.reconcile(&a).await;
    assert!(
        ready(&outcome),
        "{outcome:?} {:?}",
        h.entry(&a).await.status.message
    );
    repo.commit(&[("t.yaml", TWO_QUEUES)], "second queue");
    let outcome = h.reconcile(&a).await;
    assert!(ready(&outcome), "{outcome:?}");
    assert_eq!(
        h.entry(&a).await.status.applied.last_applied_revision,
        Some(repo.head())
    );
    assert_eq!(server.seen().tokens_issued, 1, "one token for both runs");

    let outcome = h.reconcile(&b).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let status = h.entry(&b).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::AuthenticationFailed));
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("installation 999") && message.contains("404"),
        "{message}"
    );
}

/// A registry writer who may not read a secret points an entry at a server
/// of theirs: the secret is bound to other hosts, so nothing reaches that
/// server, neither a token or password (HTTP), a key (SSH), nor a GitHub
/// App's JWT; not in a run, and not in the scheduler's probe of the source.
#[tokio::test(flavor = "multi_thread")]
async fn a_secret_is_sent_to_no_server_it_does_not_name() {
    let (repo, server) = private_repo(
        "attacker",
        Config {
            accounts: vec![("ci-bot".into(), "anything".into())],
            any_username: true,
            ..Config::default()
        },
    );
    let ssh = Listener::start();
    let (_, app_key) = App::generate("4242", "77", "ghs_unused");
    let keys = std::env::temp_dir().join(unique_name("keys"));
    std::fs::create_dir_all(&keys).unwrap();
    let (deploy_key, _) = stacksync_testkit::sshd::keygen(&keys, "deploy");
    let (_, host_key) = stacksync_testkit::sshd::keygen(&keys, "host");
    let emulator = Emulator::shared();
    let token = unique_name("tok");
    let secrets = [
        (
            "http",
            serde_json::json!({"token": token, "username": "ci-bot", "hosts": ["git.acme.example"]}),
            server.url(&repo),
        ),
        (
            "app",
            // No apiUrl: the JWT may go to GitHub's API only, never to the
            // source's host.
            serde_json::json!({"appId": 4242, "installationId": 77, "privateKey": app_key,
                "hosts": ["github.com"], "repositories": ["acme/*"]}),
            server.url(&repo),
        ),
        (
            "ssh",
            serde_json::json!({"sshPrivateKey": deploy_key,
                "knownHosts": format!("[127.0.0.1]:{} {host_key}", ssh.port()),
                "hosts": ["git.acme.example"]}),
            format!("ssh://git@127.0.0.1:{}/acme/infra.git", ssh.port()),
        ),
    ];
    let h = Harness::new("bound").await;
    let workdir = std::env::temp_dir().join(unique_name("bound"));
    let sources = sdk_sources(&emulator.sdk_config(), true, &workdir);
    for (kind, value, url) in secrets {
        let arn = emulator
            .put_secret(&format!("git-{kind}"), &value.to_string())
            .await;
        // The scheduler's probe of the source (ls-remote) ...
        let probe = as_function(
            "scheduler",
            sources.resolve(
                &SourceLocation {
                    url: url.clone(),
                    credentials: Some(arn.clone()),
                },
                "main",
            ),
        )
        .await;
        assert!(
            matches!(&probe, Err(FetchError::CredentialNotForHost { secret, .. }) if *secret == arn),
            "{kind}: {probe:?}"
        );
        // ... and a run.
        let name = stack_name(kind);
        h.apply(&entry(&name, &url, &arn)).await;
        let outcome = h.reconcile(&name).await;
        assert!(
            matches!(&outcome, Outcome::Failed(_)),
            "{kind}: {outcome:?}"
        );
        let status = h.entry(&name).await.status;
        let message = status.message.clone().unwrap_or_default();
        assert_eq!(
            status.stall_reason,
            Some(StallReason::CredentialNotForHost),
            "{kind}: {message}"
        );
        assert!(
            message.contains(&arn)
                && message.contains("127.0.0.1")
                && message.contains("Nothing was sent"),
            "{kind}: {message}"
        );
        assert!(!message.contains(&token), "{kind}: {message}");
    }
    let seen = server.seen();
    assert_eq!(
        (seen.connections, seen.authorized, seen.tokens_issued),
        (0, 0, 0),
        "the attacker's HTTP server saw nothing: {seen:?}"
    );
    assert_eq!(
        ssh.connections(),
        0,
        "the attacker's SSH server saw nothing"
    );
}

/// A server the secret may go to redirects elsewhere: the credentials are
/// not sent after the redirect (gix reuses them only on the same host and
/// port), so the other server sees none.
#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_to_another_host_carries_no_credentials() {
    let (repo, elsewhere) = private_repo(
        "elsewhere",
        Config {
            accounts: vec![("ci-bot".into(), "t0ken".into())],
            ..Config::default()
        },
    );
    let allowed = GitHttpServer::serve(
        &std::env::temp_dir(),
        Config {
            redirect_to: Some(elsewhere.root()),
            accounts: vec![("ci-bot".into(), "t0ken".into())],
            ..Config::default()
        },
    );
    let url = elsewhere
        .url(&repo)
        .replace(&elsewhere.root(), &allowed.root());
    let authority = allowed.root().trim_start_matches("http://").to_owned();
    let arn = Emulator::shared()
        .put_secret(
            "git-redirected",
            &serde_json::json!({"token": "t0ken", "username": "ci-bot", "hosts": [authority]})
                .to_string(),
        )
        .await;
    let workdir = std::env::temp_dir().join(unique_name("redirect"));
    let sources = sdk_sources(&Emulator::shared().sdk_config(), true, &workdir);
    let resolved = sources
        .resolve(
            &SourceLocation {
                url,
                credentials: Some(arn),
            },
            "main",
        )
        .await;
    assert!(allowed.seen().connections > 0, "{:?}", allowed.seen());
    let seen = elsewhere.seen();
    assert_eq!(seen.authorized, 0, "{seen:?}");
    // Said as it happened: the other server asked for credentials that were
    // never sent there; no credential was refused, none is missing.
    let said = resolved.unwrap_err().to_string();
    assert!(
        said.contains(&format!("redirected to {}", elsewhere.root()))
            && said.contains("(HTTP 401)")
            && !said.contains("refused the credentials")
            && !said.contains("No credentials were returned"),
        "{said}"
    );
}

/// CodeCommit, reached at a loopback endpoint standing in for it: the Git
/// password is the SigV4 signature the server recomputes from the role's
/// keys; no secret is read.
#[tokio::test(flavor = "multi_thread")]
async fn codecommit_is_pulled_with_the_roles_own_signature_and_no_secret() {
    let emulator = Emulator::shared();
    let config = emulator.sdk_config();
    let (repo, server) = private_repo(
        "codecommit",
        Config {
            codecommit: Some(stacksync_testkit::http::CodeCommit::of(&config).await),
            ..Config::default()
        },
    );
    let endpoint = server.root();
    let git = GitFetcher::new(std::env::temp_dir().join(unique_name("cc"))).with_credentials(
        std::sync::Arc::new(Credentials::aws(&config).with_codecommit_endpoint(Some(endpoint))),
    );
    let name = repo.dir.file_name().unwrap().to_string_lossy().into_owned();
    let source = SourceLocation::public(format!("codecommit::us-east-1://{name}"));
    let head = git.resolve(&source, "main").await.unwrap();
    assert_eq!(head, repo.head());
    let wanted = Wanted::new(vec![("t.yaml".into(), Role::Template)]);
    let files = git.fetch(&source, &head, &wanted).await.unwrap();
    assert_eq!(files, [("t.yaml".to_owned(), QUEUE.to_vec())]);
    assert!(server.seen().signed >= 2, "{:?}", server.seen());
    assert_eq!(server.seen().refused, 0);
    // What IAM sees: codecommit:GitPull by the functions that list and fetch.
    for function in ["artifact-fetch", "scheduler"] {
        record_call(function, "codecommit", "GitPull", "us-east-1", &name);
    }

    // Keys CodeCommit does not know: refused, as a wrong token is.
    let other = config
        .to_builder()
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(
                aws_credential_types::Credentials::from_keys("AKIDOTHER", "not-the-key", None),
            ),
        )
        .build();
    let wrong = GitFetcher::new(std::env::temp_dir().join(unique_name("cc"))).with_credentials(
        std::sync::Arc::new(Credentials::aws(&other).with_codecommit_endpoint(Some(server.root()))),
    );
    let err = wrong.resolve(&source, "main").await.unwrap_err();
    assert!(matches!(err, FetchError::Authentication { .. }), "{err:?}");
    // Said as it is: the signed credentials were refused (no secret is
    // involved, and none is missing).
    let said = err.to_string();
    assert!(
        said.contains("refused the Git credentials signed with the AWS credentials in use")
            && said.contains("(HTTP 401)")
            && said.contains("codecommit:GitPull")
            && !said.contains("No credentials were returned"),
        "{said}"
    );
}

/// SSH deploy keys, in-process: the right key and host key sync the stack;
/// a key the server does not know and a host key the secret does not list
/// each fail once, clearly.
#[tokio::test(flavor = "multi_thread")]
async fn ssh_deploy_keys_are_used_in_process_and_host_keys_are_verified() {
    let sshd = Sshd::start();
    let repo = GitRepo::new("ssh");
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let url = sshd.url(&repo);
    let secret = |key: &str, known_hosts: &str| {
        serde_json::json!({"sshPrivateKey": key, "knownHosts": known_hosts, "hosts": ["127.0.0.1"]})
            .to_string()
    };
    let (stranger, stranger_public) = sshd.stranger();
    let other_host = format!(
        "[127.0.0.1]:1 {stranger_public}\n{}",
        sshd.known_hosts.replace("127.0.0.1", "127.0.0.2")
    );
    let emulator = Emulator::shared();
    let cases = [
        ("good", secret(&sshd.deploy_key, &sshd.known_hosts), None),
        (
            "badkey",
            secret(&stranger, &sshd.known_hosts),
            Some((StallReason::AuthenticationFailed, "refused the deploy key")),
        ),
        (
            "badhost",
            secret(&sshd.deploy_key, &other_host),
            Some((
                StallReason::SourceUnavailable,
                "is not in the secret's knownHosts",
            )),
        ),
    ];
    let h = Harness::new("ssh").await;
    for (prefix, value, failure) in cases {
        let arn = emulator.put_secret("git-ssh", &value).await;
        let name = stack_name(prefix);
        h.apply(&entry(&name, &url, &arn)).await;
        let outcome = h.reconcile(&name).await;
        let status = h.entry(&name).await.status;
        match failure {
            None => {
                assert!(
                    ready(&outcome),
                    "{prefix}: {outcome:?} {:?}",
                    status.message
                );
                assert_eq!(status.applied.last_applied_revision, Some(repo.head()));
            }
            Some((reason, words)) => {
                assert!(
                    matches!(&outcome, Outcome::Failed(_)),
                    "{prefix}: {outcome:?}"
                );
                let message = status.message.clone().unwrap_or_default();
                assert_eq!(status.stall_reason, Some(reason), "{prefix}: {message}");
                assert!(message.contains(words), "{prefix}: {message}");
                if reason == StallReason::AuthenticationFailed {
                    // Which secret's key was refused, as for HTTP.
                    assert!(
                        message.contains(&format!("refused the deploy key from {arn}")),
                        "{prefix}: {message}"
                    );
                }
            }
        }
    }
}

/// S3 sources in a versioned bucket: a new version is picked up (and the
/// scheduler sees it with one HeadObject), an old one pinned by `ref` is
/// honoured; zip and tar.gz alike.
#[tokio::test(flavor = "multi_thread")]
async fn s3_zip_and_tar_gz_sources_follow_new_versions_and_honour_a_pinned_one() {
    let emulator = Emulator::shared();
    let bucket = emulator.source_bucket(true).await;
    let h = Harness::new("s3src").await;
    for format in ["zip", "tar.gz"] {
        let key = format!("app/template.{format}");
        let v1 = emulator
            .put_object(&bucket, &key, archive(format, QUEUE))
            .await
            .unwrap();
        let name = stack_name("s3");
        let spec = |pin: &str| {
            format!(
                "stacks:\n  - name: {name}\n    source: {{s3: 's3://{bucket}/{key}', path: stacks/t.yaml{pin}}}\n"
            )
        };
        h.apply(&spec("")).await;
        let outcome = h.reconcile(&name).await;
        let status = h.entry(&name).await.status;
        assert!(
            ready(&outcome),
            "{format}: {outcome:?} {:?}",
            status.message
        );
        assert_eq!(
            status.applied.last_applied_revision.as_deref(),
            Some(v1.as_str()),
            "{format}"
        );
        assert_eq!(queue_count(&name).await, 1);

        let v2 = emulator
            .put_object(&bucket, &key, archive(format, TWO_QUEUES))
            .await
            .unwrap();
        assert_ne!(v1, v2);
        assert!(ready(&h.reconcile(&name).await), "{format}");
        assert_eq!(
            h.entry(&name).await.status.applied.last_applied_revision,
            Some(v2.clone())
        );
        assert_eq!(
            queue_count(&name).await,
            2,
            "{format}: the new version deployed"
        );

        h.apply(&spec(&format!(", ref: '{v1}'"))).await;
        assert!(ready(&h.reconcile(&name).await), "{format}");
        assert_eq!(
            h.entry(&name).await.status.applied.last_applied_revision,
            Some(v1.clone())
        );
        assert_eq!(
            queue_count(&name).await,
            1,
            "{format}: back to the pinned version"
        );
    }
}

/// A run takes only the files it wants: where the server allows partial
/// clone, the unrelated blobs never cross the wire; where it does not, they
/// do (one depth-1 pack) but only the wanted ones are read.
#[tokio::test(flavor = "multi_thread")]
async fn only_the_wanted_files_are_taken_and_with_a_filter_only_they_cross_the_wire() {
    // 4 MB that does not compress: what a fetch of everything would carry.
    let noise: Vec<u8> = (0u32..1 << 20)
        .flat_map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes())
        .collect();
    let wanted = Wanted::new(vec![
        ("t.yaml".into(), Role::Template),
        ("params/p.json".into(), Role::ParameterFile),
        ("nested".into(), Role::Included),
    ]);
    let mut sent = Vec::new();
    for allow_filter in [true, false] {
        let repo = GitRepo::new("lean");
        repo.config("uploadpack.allowFilter", &allow_filter.to_string());
        let head = repo.commit(
            &[
                ("t.yaml", QUEUE),
                ("params/p.json", b"{}"),
                ("nested/a.yaml", b"a"),
                ("nested/deep/b.yaml", b"b"),
                ("other/noise.bin", &noise),
                ("other/readme.md", b"not wanted"),
            ],
            "monorepo",
        );
        let server = GitHttpServer::serve_repo(&repo, Config::default());
        let git = GitFetcher::new(std::env::temp_dir().join(unique_name("lean")));
        let files = git
            .fetch(&SourceLocation::public(server.url(&repo)), &head, &wanted)
            .await
            .unwrap();
        let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "nested/a.yaml",
                "nested/deep/b.yaml",
                "params/p.json",
                "t.yaml"
            ]
        );
        sent.push(server.seen().bytes_sent);
    }
    let (filtered, whole) = (sent[0], sent[1]);
    assert!(filtered < 64 * 1024, "with a filter: {filtered} bytes");
    assert!(
        whole > noise.len(),
        "without: the whole tree, {whole} bytes"
    );
}

/// A server that accepts and never answers costs a run its timeouts twice
/// (one retry), then the run ends `Failed (TimedOut)`: it once held a run
/// for half an hour (300 s a try, six tries).
#[tokio::test(flavor = "multi_thread")]
async fn a_git_server_that_never_answers_ends_the_run_after_two_tries() {
    let repo = GitRepo::new("hang");
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let server = GitHttpServer::serve_repo(
        &repo,
        Config {
            hang: true,
            ..Config::default()
        },
    );
    let mut h = Harness::new("hang").await;
    let second = std::time::Duration::from_secs(1);
    h.steps.sources.inner.git = GitFetcher::new(std::env::temp_dir().join(unique_name("hang")))
        .with_timeouts(Timeouts {
            connect: second,
            io: second,
            request: second,
        });
    let name = stack_name("hang");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        server.url(&repo)
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(
        status.stall_reason,
        Some(StallReason::TimedOut),
        "{:?}",
        status.message
    );
    let message = status.message.unwrap_or_default();
    assert!(message.contains("did not answer in time"), "{message}");
    assert_eq!(server.seen().held, 2, "one try and one retry");
}

/// Whether another try can help is decided by the error's type and the
/// server's answer, never by digits in its text: a repository the daemon
/// does not export is final, whatever its name, and a server that refuses
/// the connection is worth retrying even with 401, 403 and 404 in its URL.
#[tokio::test(flavor = "multi_thread")]
async fn a_repository_that_is_not_exported_is_final_and_a_refused_connection_is_not() {
    use stacksync::ports::PortError;
    use stacksync_testkit::git::GitDaemon;

    let repo = GitRepo::new("exported");
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let daemon = GitDaemon::serve(&repo);
    let fetcher = GitFetcher::new(std::env::temp_dir().join(unique_name("classify")));
    let at = |url: String| SourceLocation {
        url,
        credentials: None,
    };
    let served = daemon.url(&repo);
    assert!(fetcher.resolve(&at(served.clone()), "main").await.is_ok());

    let (base, _) = served.rsplit_once('/').unwrap();
    let missing = format!("{base}/missing-401-403-404.git");
    match fetcher.resolve(&at(missing), "main").await {
        Err(FetchError::Port(PortError::Refused(m))) => {
            assert!(m.contains("the server refused"), "{m}")
        }
        other => panic!("a repository the daemon does not export is final: {other:?}"),
    }

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    for url in [
        format!("http://127.0.0.1:{closed}/team-401/repo-403/404.git"),
        format!("git://127.0.0.1:{closed}/team-401/repo-404.git"),
    ] {
        match fetcher.resolve(&at(url.clone()), "main").await {
            Err(FetchError::Port(PortError::Transient(_))) => {}
            other => panic!("{url}: a refused connection is worth another try: {other:?}"),
        }
    }
}

/// A deployed installation refuses git:// and http:// sources (anyone on
/// the path could choose the template) unless the spec says `insecure`.
#[tokio::test(flavor = "multi_thread")]
async fn an_unauthenticated_transport_is_refused_when_deployed_unless_the_spec_says_insecure() {
    use stacksync_testkit::git::GitDaemon;

    let repo = GitRepo::new("plain");
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let daemon = GitDaemon::serve(&repo);
    let mut h = Harness::new("plain").await;
    h.steps.config.local = false;
    let name = stack_name("plain");
    let entry = |insecure: bool| {
        format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml, insecure: {insecure}}}\n",
            daemon.url(&repo)
        )
    };
    h.apply(&entry(false)).await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::Unsupported));
    let message = status.message.unwrap_or_default();
    assert!(message.contains("git:// is not authenticated"), "{message}");
    assert_eq!(queue_count(&name).await, 0, "no stack made");

    h.apply(&entry(true)).await;
    let outcome = h.reconcile(&name).await;
    assert!(ready(&outcome), "{outcome:?}");
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
}

/// `source.signedBy`: a run deploys a commit only if it carries an SSH
/// signature by a listed key; unsigned, or signed by another key, it ends
/// `Failed (InvalidSource)` and nothing is deployed.
#[tokio::test(flavor = "multi_thread")]
async fn only_commits_signed_by_a_listed_key_are_deployed() {
    let keys = std::env::temp_dir().join(unique_name("keys"));
    std::fs::create_dir_all(&keys).unwrap();
    let (trusted, trusted_pub) = signing_key(&keys, "release");
    let (stranger, _) = signing_key(&keys, "stranger");
    let repo = GitRepo::new("signed");
    repo.commit(&[("t.yaml", QUEUE)], "unsigned");
    let h = Harness::new("signed").await;
    let name = stack_name("signed");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml, signedBy: ['{trusted_pub}']}}\n",
        repo.file_url()
    ))
    .await;
    let failed_with = |status: stacksync::status::Status| {
        assert_eq!(status.phase, Phase::Failed, "{:?}", status.message);
        assert_eq!(status.stall_reason, Some(StallReason::InvalidSource));
        status.message.unwrap_or_default()
    };

    let outcome = h.reconcile(&name).await;
    assert!(!ready(&outcome));
    let message = failed_with(h.entry(&name).await.status);
    assert!(message.contains("is not signed"), "{message}");
    assert_eq!(queue_count(&name).await, 0);

    let signed = repo.commit_signed(&[], "signed by release", &trusted);
    let outcome = h.reconcile(&name).await;
    assert!(ready(&outcome), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(
        status.applied.last_applied_revision.as_deref(),
        Some(signed.as_str())
    );

    repo.commit_signed(&[("t.yaml", TWO_QUEUES)], "signed by a stranger", &stranger);
    let outcome = h.reconcile(&name).await;
    assert!(!ready(&outcome));
    let status = h.entry(&name).await.status;
    assert_eq!(
        status.applied.last_applied_revision.as_deref(),
        Some(signed.as_str()),
        "the signed commit stays deployed"
    );
    let message = failed_with(status);
    assert!(
        message.contains("is signed by SHA256:") && message.contains("does not list"),
        "{message}"
    );
}
