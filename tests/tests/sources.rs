//! Private sources, end to end through the local runner against the
//! emulator: Git over smart HTTP on 127.0.0.1 that requires credentials
//! (from Secrets Manager and SSM, as tokens, passwords, or a GitHub App's
//! installation tokens), CodeCommit signed with the role's own keys, and
//! what a refused credential leaves behind: a status that names the secret
//! refused, no retries within the run (the next try after the backoff, up
//! to `maxAttempts`), and the secret nowhere.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::credentials::Credentials;
use stacksync::adapters::git::{GitFetcher, Timeouts};
use stacksync::adapters::s3_source::S3Archives;
use stacksync::asl::{Outcome, Progress};
use stacksync::clock::now_millis;
use stacksync::content::{Role, Wanted};
use stacksync::fakes::RecordingStarter;
use stacksync::ports::{FetchError, SourceFetcher, SourceLocation};
use stacksync::status::{Phase, StallReason};
use stacksync::triggers::scheduler::judge::Reason;
use stacksync::triggers::scheduler::{Config as SchedulerConfig, Scheduler};
use stacksync::wiring::sdk_sources;
use stacksync_testkit::counted::CallCounter;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::{App, Config, GitHttpServer};
use stacksync_testkit::iam::as_function;
use stacksync_testkit::iam::record::record_call;
use stacksync_testkit::listener::Listener;
use stacksync_testkit::sshd::Sshd;
use stacksync_testkit::{Emulator, archives, logs, unique_name};

const QUEUE: &[u8] = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n";
const TWO_QUEUES: &[u8] =
    b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n  Second: {Type: AWS::SQS::Queue}\n";

fn stack_name(prefix: &str) -> String {
    unique_name(prefix).replace('-', "x")
}

fn entry(name: &str, url: &str, secret: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: t.yaml, credentialsSecret: '{secret}'}}\n"
    )
}

/// A repository with the queue template, and a server that requires `config`.
fn private_repo(prefix: &str, config: Config) -> (GitRepo, GitHttpServer) {
    let repo = GitRepo::new(prefix);
    repo.commit(&[("t.yaml", QUEUE)], "queue");
    let server = GitHttpServer::serve_repo(&repo, config);
    (repo, server)
}

fn ready(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Succeeded(_))
}

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
        assert_eq!(status.last_applied_revision, Some(repo.head()));
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
        h.entry(&a).await.status.last_applied_revision,
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
                assert_eq!(status.last_applied_revision, Some(repo.head()));
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

/// A template in an archive, as a zip or a tar.gz.
fn archive(format: &str, template: &[u8]) -> Vec<u8> {
    match format {
        "zip" => archives::zip(&[(b"stacks/t.yaml", template), (b"README.md", b"hello")]),
        _ => archives::tar_gz(&[
            archives::file("stacks/t.yaml", template),
            archives::file("README.md", b"hello"),
        ]),
    }
}

async fn queue_count(stack: &str) -> usize {
    Emulator::shared()
        .cloudformation()
        .describe_stack_resources()
        .stack_name(stack)
        .send()
        .await
        .map(|r| r.stack_resources().len())
        .unwrap_or(0)
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
            status.last_applied_revision.as_deref(),
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
            h.entry(&name).await.status.last_applied_revision,
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
            h.entry(&name).await.status.last_applied_revision,
            Some(v1.clone())
        );
        assert_eq!(
            queue_count(&name).await,
            1,
            "{format}: back to the pinned version"
        );
    }
}

/// The scheduler lists a private repository with its secret and checks an
/// S3 source with one HeadObject; when either moves, it starts exactly its
/// follower, whose run deploys the new revision.
#[tokio::test(flavor = "multi_thread")]
async fn the_scheduler_sees_private_and_s3_sources_move_and_starts_their_followers() {
    let emulator = Emulator::shared();
    let token = unique_name("tok");
    let (repo, server) = private_repo(
        "sched",
        Config {
            accounts: vec![("ci-bot".into(), token.clone())],
            ..Config::default()
        },
    );
    let secret = emulator
        .put_secret(
            "git-token",
            &format!(r#"{{"token": "{token}", "username": "ci-bot", "hosts": ["127.0.0.1"]}}"#),
        )
        .await;
    let bucket = emulator.source_bucket(true).await;
    let key = "app/template.zip";
    emulator
        .put_object(&bucket, key, archive("zip", QUEUE))
        .await;
    let h = Harness::new("sched").await;
    let (git, s3) = (stack_name("git"), stack_name("s3"));
    h.apply(&format!(
        "{}  - name: {s3}\n    source: {{s3: 's3://{bucket}/{key}', path: stacks/t.yaml}}\n",
        entry(&git, &server.url(&repo), &secret)
    ))
    .await;
    let s3_calls = CallCounter::new("s3");
    let workdir = std::env::temp_dir().join(unique_name("sched"));
    let mut sources = sdk_sources(&emulator.sdk_config(), true, &workdir);
    let counted = aws_sdk_s3::config::Builder::from(&emulator.sdk_config())
        .force_path_style(true)
        .interceptor(s3_calls.clone())
        .build();
    sources.s3 = Some(S3Archives::new(
        aws_sdk_s3::Client::from_conf(counted),
        workdir,
    ));
    let scheduler = Scheduler {
        registry: h.steps.registry.clone(),
        starter: RecordingStarter::new(),
        sources,
        cloudformation: SdkCloudFormationFactory::new(emulator.sdk_config()),
        config: SchedulerConfig::default(),
    };
    let first = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert_eq!(first.errors, Vec::<String>::new());
    assert_eq!(first.started.len(), 2, "both new: {first:?}");
    for (_, stack, _) in scheduler.starter.started() {
        assert!(ready(&h.reconcile(&stack).await), "{stack}");
    }

    repo.commit(&[("t.yaml", TWO_QUEUES)], "second queue");
    emulator
        .put_object(&bucket, key, archive("zip", TWO_QUEUES))
        .await;
    let mark = s3_calls.len();
    let moved = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert_eq!(
        s3_calls.since(mark),
        ["s3:HeadObject"],
        "one HeadObject for the S3 source"
    );
    assert_eq!(moved.errors, Vec::<String>::new());
    let mut started: Vec<(String, Reason)> = moved
        .started
        .iter()
        .map(|s| (s.stack.clone(), s.reason))
        .collect();
    started.sort();
    let mut expected = vec![(git.clone(), Reason::Pushed), (s3.clone(), Reason::Pushed)];
    expected.sort();
    assert_eq!(started, expected);
    for stack in [&git, &s3] {
        assert!(ready(&h.reconcile(stack).await), "{stack}");
        assert_eq!(
            queue_count(stack).await,
            2,
            "{stack}: the new revision deployed"
        );
    }
    let idle = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(idle.started.is_empty(), "nothing moved: {idle:?}");
    assert!(
        server.seen().refused == 0,
        "the scheduler lists with the secret"
    );
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

/// The scheduler lists a repository whose password is in SSM, leaves a
/// source pinned to an S3 version alone when newer versions come, and says
/// which source it cannot read without holding up the others.
#[tokio::test(flavor = "multi_thread")]
async fn the_scheduler_reads_ssm_credentials_keeps_pinned_versions_and_names_what_it_cannot_read() {
    let emulator = Emulator::shared();
    let (repo, server) = private_repo(
        "pinned",
        Config {
            accounts: vec![("deploy".into(), "pass-word".into())],
            ..Config::default()
        },
    );
    let parameter = emulator
        .put_parameter(
            "git-password",
            r#"{"username": "deploy", "password": "pass-word", "hosts": ["127.0.0.1"]}"#,
        )
        .await;
    let bucket = emulator.source_bucket(true).await;
    let key = "app/template.tgz";
    let v1 = emulator
        .put_object(&bucket, key, archive("tgz", QUEUE))
        .await
        .unwrap();
    let h = Harness::new("pinned").await;
    let (git, pinned, missing) = (stack_name("git"), stack_name("pin"), stack_name("miss"));
    h.apply(&format!(
        "{}  - name: {pinned}\n    source: {{s3: 's3://{bucket}/{key}', ref: '{v1}', path: stacks/t.yaml}}\n\
         \x20 - name: {missing}\n    source: {{s3: 's3://{bucket}/nothing-here.zip', path: stacks/t.yaml}}\n",
        entry(&git, &server.url(&repo), &parameter)
    ))
    .await;
    let scheduler = Scheduler {
        registry: h.steps.registry.clone(),
        starter: RecordingStarter::new(),
        sources: sdk_sources(
            &emulator.sdk_config(),
            true,
            &std::env::temp_dir().join(unique_name("pin")),
        ),
        cloudformation: SdkCloudFormationFactory::new(emulator.sdk_config()),
        config: SchedulerConfig::default(),
    };
    let cannot_read = |errors: &[String]| {
        errors.len() == 1 && errors[0].contains("nothing-here.zip: there is no such object")
    };
    let first = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(cannot_read(&first.errors), "{:?}", first.errors);
    assert_eq!(first.started.len(), 3, "all new: {first:?}");
    for stack in [&git, &pinned] {
        assert!(ready(&h.reconcile(stack).await), "{stack}");
    }
    assert!(matches!(h.reconcile(&missing).await, Outcome::Failed(_)));

    repo.commit(&[("t.yaml", TWO_QUEUES)], "second queue");
    emulator
        .put_object(&bucket, key, archive("tgz", TWO_QUEUES))
        .await;
    let moved = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(cannot_read(&moved.errors), "{:?}", moved.errors);
    let started: Vec<(String, Reason)> = moved
        .started
        .iter()
        .map(|s| (s.stack.clone(), s.reason))
        .collect();
    assert_eq!(
        started,
        [(git.clone(), Reason::Pushed)],
        "the pinned stack stays"
    );
    assert!(server.seen().refused == 0);
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
        Err(FetchError::Port(PortError::Rejected(m))) => {
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

/// An SSH key pair made by `ssh-keygen` in `dir`: the private key's path
/// and the public key's line.
fn signing_key(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let key = dir.join(name);
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(status.success(), "ssh-keygen");
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_owned())
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
        status.last_applied_revision.as_deref(),
        Some(signed.as_str())
    );

    repo.commit_signed(&[("t.yaml", TWO_QUEUES)], "signed by a stranger", &stranger);
    let outcome = h.reconcile(&name).await;
    assert!(!ready(&outcome));
    let status = h.entry(&name).await.status;
    assert_eq!(
        status.last_applied_revision.as_deref(),
        Some(signed.as_str()),
        "the signed commit stays deployed"
    );
    let message = failed_with(status);
    assert!(
        message.contains("is signed by SHA256:") && message.contains("does not list"),
        "{message}"
    );
}

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
    let failures = status.failures.clone().unwrap();
    assert_eq!((failures.count, failures.gave_up), (1, false));
    assert!(status.next_reconcile_at.is_some(), "{status:?}");

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
    assert_eq!(status.last_applied_revision, Some(repo.head()));
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
            FetchError::Port(stacksync::ports::PortError::Rejected(_))
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
        matches!(&err, FetchError::Port(PortError::Rejected(_))),
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
