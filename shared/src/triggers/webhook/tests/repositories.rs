//! The one repository a delivery names, in the hosts' published payloads
//! (tests/fixtures/webhook/) and in payloads whose URLs name others.

use super::*;
use crate::source::normalize_url;

/// A published payload's event and delivery-id headers.
type EventHeaders = [(&'static str, &'static str); 2];

/// The hosts' published payloads, each with its event header: (payload,
/// headers, the repository's normal URL).
const PUBLISHED: [(&str, EventHeaders, &str); 6] = [
    (
        "github-push-branch",
        [("X-GitHub-Event", "push"), ("X-GitHub-Delivery", "d")],
        "github.com/codertocat/hello-world",
    ),
    (
        "github-push-tag",
        [("X-GitHub-Event", "push"), ("X-GitHub-Delivery", "d")],
        "octocoders.github.io/codertocat/hello-world",
    ),
    (
        "gitlab-push",
        [
            ("X-Gitlab-Event", "Push Hook"),
            ("X-Gitlab-Event-UUID", "d"),
        ],
        "example.com/mike/diaspora",
    ),
    (
        "gitlab-tag-push",
        [
            ("X-Gitlab-Event", "Tag Push Hook"),
            ("X-Gitlab-Event-UUID", "d"),
        ],
        "example.com/jsmith/example",
    ),
    (
        "bitbucket-push-signed",
        [("X-Event-Key", "repo:push"), ("X-Request-UUID", "d")],
        "bitbucket.org/nfalco79/test-repos",
    ),
    (
        "bitbucket-push-tag",
        [("X-Event-Key", "repo:push"), ("X-Request-UUID", "d")],
        "bitbucket.org/amuniz/test-repos",
    ),
];

fn published_fixture(name: &str, headers: EventHeaders) -> Fixture {
    let value: serde_json::Value = serde_json::from_str(published(name)).unwrap();
    Fixture {
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body: serde_json::to_vec(&value).unwrap(),
    }
}

#[test]
fn a_published_payload_names_one_repository_in_each_of_its_spellings() {
    for (name, headers, normal) in PUBLISHED {
        for push in pushes(published_fixture(name, headers).signed().receive().unwrap()) {
            let mut forms = push.repository_urls.iter();
            assert!(forms.next().unwrap().starts_with("https://"), "{name}");
            assert!(forms.next().unwrap().starts_with("git@"), "{name}");
            for url in &push.repository_urls {
                assert_eq!(normalize_url(url), normal, "{name}: {url}");
            }
        }
    }
}

/// Every URL field of each payload set to another repository (the one the
/// host is read from to another path on that host, the others to another
/// host): left out, the repository is the one the provider names.
#[test]
fn a_url_naming_another_repository_is_no_spelling_of_the_pushed_one() {
    let elsewhere: Edit = |b| {
        for (object, field) in [("repository", "html_url"), ("project", "web_url")] {
            if let Some(url) = b[object][field].as_str() {
                let host = crate::source::host_of(url).to_owned();
                b[object][field] = format!("https://{host}/acme/private-infra").into();
            }
        }
        for (object, fields) in [
            (
                "repository",
                &[
                    "clone_url",
                    "ssh_url",
                    "git_url",
                    "url",
                    "homepage",
                    "git_http_url",
                    "git_ssh_url",
                ][..],
            ),
            (
                "project",
                &[
                    "git_http_url",
                    "git_ssh_url",
                    "http_url",
                    "ssh_url",
                    "homepage",
                    "url",
                ][..],
            ),
        ] {
            for field in fields {
                if b[object].get(*field).is_some() {
                    b[object][*field] = "git@evil.example:acme/private-infra.git".into();
                }
            }
        }
        if b["repository"]["links"]["html"].is_object() {
            b["repository"]["links"]["html"]["href"] =
                "https://bitbucket.org/acme/private-infra".into();
        }
    };
    for (name, headers, normal) in PUBLISHED {
        let mut d = published_fixture(name, headers);
        let mut body: serde_json::Value = serde_json::from_slice(&d.body).unwrap();
        elsewhere(&mut body);
        d.body = serde_json::to_vec(&body).unwrap();
        for push in pushes(d.signed().receive().unwrap()) {
            for url in &push.repository_urls {
                assert_eq!(normalize_url(url), normal, "{name}: {url}");
            }
            // One repository: its ref's key, and its short name's.
            assert_eq!(
                push.source_keys().len(),
                2,
                "{name}: {:?}",
                push.source_keys()
            );
        }
    }
    // Another port of the same host and path is a spelling (self-managed
    // GitLab's SSH); the same path on another host is not.
    let d = Fixture::edited("gitlab-push", |b| {
        b["project"]["git_ssh_url"] =
            "ssh://git@gitlab.com:2222/acme-group/platform/infra.git".into();
        b["project"]["git_http_url"] =
            "https://gitlab.example/acme-group/platform/infra.git".into();
    });
    let push = pushes(d.signed().receive().unwrap()).remove(0);
    assert!(
        push.repository_urls
            .contains(&"ssh://git@gitlab.com:2222/acme-group/platform/infra.git".to_owned()),
        "{:?}",
        push.repository_urls
    );
    assert!(
        !push
            .repository_urls
            .iter()
            .any(|u| u.contains("gitlab.example")),
        "{:?}",
        push.repository_urls
    );
}
