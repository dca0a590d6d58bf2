//! How registry sources are read, against the emulator: private ones with
//! a token or a password (an HTTP Git server with credentials on
//! 127.0.0.1), signed ones (`--signed-by`), an S3 archive from its "Object
//! Created" events. The world is `stacksync_testkit::registry_world`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use serde_json::{Value, json};
use stacksync::asl::Outcome as RunOutcome;
use stacksync::clock::now_millis;
use stacksync::ports::Trigger;
use stacksync::registry::{Entries, RegistrySources};
use stacksync::registry_source::{SourceSpec, SourceState};
use stacksync::triggers::events::from_value;
use stacksync_testkit::git::signing_key;
use stacksync_testkit::http::{Config as HttpConfig, GitHttpServer};
use stacksync_testkit::iam::as_function;
use stacksync_testkit::registry_world::{QUEUE, World};
use stacksync_testkit::{Emulator, unique_name};

#[tokio::test(flavor = "multi_thread")]
async fn private_registry_sources_are_read_with_a_token_or_a_password_by_the_webhook_and_the_scheduler()
 {
    let w = World::new("regsrc-private").await;
    let token = unique_name("tok");
    let server = GitHttpServer::serve_repo(
        &w.repo,
        HttpConfig {
            accounts: vec![
                ("ci-bot".into(), token.clone()),
                ("deploy".into(), "pass-word".into()),
            ],
            ..HttpConfig::default()
        },
    );
    let url = server.url(&w.repo);
    let emulator = Emulator::shared();
    let secret = emulator
        .put_secret(
            "regsrc-token",
            &format!(r#"{{"token": "{token}", "username": "ci-bot", "hosts": ["127.0.0.1"]}}"#),
        )
        .await;
    let parameter = emulator
        .put_parameter(
            "regsrc-password",
            r#"{"username": "deploy", "password": "pass-word", "hosts": ["127.0.0.1"]}"#,
        )
        .await;
    w.add_source_at("by-token", &url, "a/stacks.yaml", Some(secret))
        .await;
    w.add_source_at("by-password", &url, "b/stacks.yaml", Some(parameter))
        .await;
    let (a, b) = (w.name("a"), w.name("b"));
    let file =
        |name: &str| format!("stacks:\n  - name: {name}\n    source: {{ path: ./t.yaml }}\n");
    let c1 = w.repo.commit(
        &[
            ("a/stacks.yaml", file(&a).as_bytes()),
            ("b/stacks.yaml", file(&b).as_bytes()),
            ("a/t.yaml", QUEUE.as_bytes()),
            ("b/t.yaml", QUEUE.as_bytes()),
        ],
        "two private sources",
    );
    // The push names the repository as the HTTP server serves it.
    w.push_to(&url, &c1).await;
    for (source, entry) in [("by-token", &a), ("by-password", &b)] {
        let read = w.source(source).await;
        assert_eq!(
            read.status.applied_revision.as_deref(),
            Some(c1.as_str()),
            "{source}: {:?}",
            read.status
        );
        let spec = w.h.entry(entry).await.spec;
        assert!(
            spec.source.credentials_secret.is_some(),
            "a relative entry takes its source's secret"
        );
    }
    assert_eq!(w.run_started().await, [a.clone(), b.clone()]);

    // The scheduler lists and reads them with the same secrets.
    let c2 = w
        .repo
        .commit(&[("a/stacks.yaml", b"stacks:\n")], "a's entry goes");
    let scheduler = w.scheduler();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // Its only entry: the guard holds (every entry of the source).
    assert_eq!(w.source("by-token").await.status.state, SourceState::Held);
    assert_eq!(w.source("by-token").await.status.hold.unwrap().commit, c2);
    assert_eq!(
        w.source("by-password")
            .await
            .status
            .applied_revision
            .as_deref(),
        Some(c2.as_str())
    );
}

/// An S3 "Object Created" event, as EventBridge delivers it (`version`:
/// the object's version id, absent for an unversioned bucket).
fn object_created(bucket: &str, key: &str, version: Option<&str>) -> Value {
    let mut object = json!({"key": key, "size": 1024, "etag": unique_name("etag")});
    if let Some(version) = version {
        object["version-id"] = json!(version);
    }
    json!({
        "version": "0", "id": unique_name("event"), "detail-type": "Object Created",
        "source": "aws.s3", "account": "123456789012", "time": "2026-11-26T10:20:44Z",
        "region": "us-east-1", "resources": [format!("arn:aws:s3:::{bucket}")],
        "detail": {"version": "0", "bucket": {"name": bucket}, "object": object, "reason": "PutObject"}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_s3_registry_source_is_applied_from_its_object_created_events() {
    let w = World::new("regsrc-s3").await;
    let emulator = Emulator::shared();
    let bucket = emulator.source_bucket(true).await;
    let key = "platform/stacks.zip";
    let url = format!("s3://{bucket}/{key}");
    let spec = SourceSpec {
        name: "archive".into(),
        url: url.clone(),
        reference: String::new(),
        path: "deploy/stacks.yaml".into(),
        credentials_secret: None,
        signed_by: vec![],
        insecure: false,
    };
    assert!(w.h.steps.registry.add_registry_source(&spec).await.unwrap());
    let handler = w.events_handler();
    let archive = |names: &[&str]| {
        let stacks: String = names
            .iter()
            .map(|n| format!("  - name: {n}\n    source: {{ path: ./t.yaml }}\n"))
            .collect();
        let stacks = format!("stacks:\n{stacks}");
        stacksync_testkit::archives::zip(&[
            (b"deploy/stacks.yaml", stacks.as_bytes()),
            (b"deploy/t.yaml", QUEUE.as_bytes()),
        ])
    };
    let (one, two) = (w.name("one"), w.name("two"));
    let v1 = emulator
        .put_object(&bucket, key, archive(&[&one]))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, Some(&v1))).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    let entry = w.h.entry(&one).await;
    assert_eq!(
        (
            entry.spec.source.s3.as_deref(),
            entry.spec.source.path.as_str()
        ),
        (Some(url.as_str()), "deploy/t.yaml")
    );
    let started: Vec<(String, String, Trigger)> = handler.starter.started();
    assert!(started.iter().any(|(_, s, _)| s == &one), "{started:?}");
    let run = w.h.reconcile(&one).await;
    assert!(matches!(run, RunOutcome::Succeeded(_)), "{run:?}");
    assert_eq!(
        w.h.entry(&one)
            .await
            .status
            .applied
            .last_applied_revision
            .as_deref(),
        Some(v1.as_str())
    );

    // An event that names no version (an ETag only): the source is read at
    // its latest version.
    let v2 = emulator
        .put_object(&bucket, key, archive(&[&one, &two]))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, None)).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    assert!(w.h.steps.registry.get(&two).await.unwrap().is_some());
    assert_eq!(
        w.source("archive").await.status.applied_revision.as_deref(),
        Some(v2.as_str())
    );

    // Renamed, then broken: the rename gives the old stack's claim up, the
    // broken archive changes nothing and is told.
    let renamed = format!("{one}-renamed");
    let stacks = format!(
        "stacks:\n  - name: {one}\n    stackName: {renamed}\n    source: {{ path: ./t.yaml }}\n"
    );
    let zip = |stacks: &str| {
        stacksync_testkit::archives::zip(&[
            (b"deploy/stacks.yaml", stacks.as_bytes()),
            (b"deploy/t.yaml", QUEUE.as_bytes()),
        ])
    };
    let v3 = emulator
        .put_object(&bucket, key, zip(&stacks))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, Some(&v3))).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    assert_eq!(
        w.h.entry(&one).await.spec.stack_name.as_deref(),
        Some(renamed.as_str())
    );
    let v4 = emulator
        .put_object(&bucket, key, zip("stacks: ["))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, Some(&v4))).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    let source = w.source("archive").await;
    assert_eq!(source.status.state, SourceState::Failed);
    assert_eq!(source.status.applied_revision.as_deref(), Some(v3.as_str()));
}

/// `--signed-by`: a source's commit is read only if signed by a listed key,
/// and its entries without a repository take the same rule.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_source_reads_only_commits_signed_by_a_listed_key() {
    let w = World::new("regsrc-signed").await;
    let keys = std::env::temp_dir().join(unique_name("regsrc-keys"));
    std::fs::create_dir_all(&keys).unwrap();
    let (trusted, trusted_pub) = signing_key(&keys, "release");
    let spec = SourceSpec {
        name: "signed".into(),
        url: w.url.clone(),
        reference: "main".into(),
        path: "stacks.yaml".into(),
        credentials_secret: None,
        signed_by: vec![trusted_pub.clone()],
        insecure: true,
    };
    assert!(w.h.steps.registry.add_registry_source(&spec).await.unwrap());
    let name = w.name("signed");
    let file = format!("stacks:\n  - name: {name}\n    source: {{ path: ./t.yaml }}\n");
    let unsigned = w
        .commit_and_push(
            &[
                ("stacks.yaml", file.as_bytes()),
                ("t.yaml", QUEUE.as_bytes()),
            ],
            "unsigned",
        )
        .await;
    let source = w.source("signed").await;
    assert_eq!(source.status.state, SourceState::Failed);
    let failure = source.status.failure.unwrap();
    assert_eq!(failure.commit, unsigned);
    assert!(
        failure.problems[0].contains("is not signed"),
        "{:?}",
        failure.problems
    );
    assert!(
        w.h.steps.registry.get(&name).await.unwrap().is_none(),
        "nothing of it written"
    );

    let signed = w.repo.commit_signed(&[], "signed by release", &trusted);
    w.push(&signed).await;
    let source = w.source("signed").await;
    assert_eq!(
        source.status.applied_revision.as_deref(),
        Some(signed.as_str()),
        "{:?}",
        source.status
    );
    assert_eq!(
        w.h.entry(&name).await.spec.source.signed_by,
        [trusted_pub],
        "the entry takes its source's keys"
    );
}
