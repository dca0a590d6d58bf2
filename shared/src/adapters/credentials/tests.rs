use super::*;

const ARN: &str = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:git-AbCdEf";

fn credentials(secret: &str) -> Credentials {
    Credentials::fixed([(ARN.to_owned(), secret.to_owned())], "eu-west-1")
}

/// Where the tests' secrets may go.
const BOUND: &str = r#""hosts": ["github.com", "gitlab.com", "bitbucket.org", "git.acme.internal"], "repositories": ["acme/*", "infra"]"#;

/// A secret's JSON (`{...}` without its braces) bound to the tests' hosts.
fn bound(fields: &str) -> String {
    format!("{{{fields}, {BOUND}}}")
}

fn at(url: &str) -> SourceLocation {
    SourceLocation {
        url: url.into(),
        credentials: Some(ARN.into()),
    }
}

fn basic(auth: GitAuth) -> (String, String) {
    match auth {
        GitAuth::Basic { username, password } => (username, password.expose().to_owned()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_token_goes_under_its_hosts_user_name_or_the_one_the_secret_gives() {
    let c = credentials(&bound(r#""token": "ghp_abc""#));
    let (url, auth) = c
        .git_access(&at("https://github.com/acme/infra.git"))
        .await
        .unwrap();
    assert_eq!(url, "https://github.com/acme/infra.git");
    assert_eq!(basic(auth), ("x-access-token".into(), "ghp_abc".into()));
    let (_, auth) = c
        .git_access(&at("https://gitlab.com/acme/infra.git"))
        .await
        .unwrap();
    assert_eq!(basic(auth).0, "oauth2");

    let c = credentials(&bound(r#""token": "t0k", "username": "ci-bot""#));
    let (_, auth) = c
        .git_access(&at("https://git.acme.internal/infra.git"))
        .await
        .unwrap();
    assert_eq!(basic(auth), ("ci-bot".into(), "t0k".into()));
}

#[tokio::test]
async fn a_token_for_a_host_of_unknown_convention_asks_for_a_user_name_without_showing_it() {
    let c = credentials(&bound(r#""token": "hunter2""#));
    let err = c
        .git_access(&at("https://git.acme.internal/infra.git"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("add `username`"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[tokio::test]
async fn ssh_keys_and_passwords_are_presented_as_they_are_stored() {
    let c = credentials(&bound(r#""username": "me", "password": "pw""#));
    let (_, auth) = c
        .git_access(&at("https://bitbucket.org/acme/infra.git"))
        .await
        .unwrap();
    assert_eq!(basic(auth), ("me".into(), "pw".into()));
    let c = credentials(&bound(
        r#""sshPrivateKey": "KEY", "knownHosts": "host ssh-ed25519 AAAA""#,
    ));
    let (_, auth) = c
        .git_access(&at("git@github.com:acme/infra.git"))
        .await
        .unwrap();
    assert!(matches!(auth, GitAuth::SshKey(k) if k.known_hosts.starts_with("host")));
}

#[tokio::test]
async fn nothing_of_a_secret_shows_in_debug_output() {
    let c = credentials(&bound(r#""username": "me", "password": "hunter2""#));
    let (_, auth) = c
        .git_access(&at("https://bitbucket.org/acme/infra.git"))
        .await
        .unwrap();
    let shown = format!("{auth:?} {c:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
}

#[tokio::test]
async fn a_missing_secret_is_named_and_codecommit_without_keys_is_refused() {
    let c = Credentials::fixed([], "eu-west-1");
    let err = c
        .git_access(&at("https://github.com/a/b"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(ARN) && err.contains("no such secret"), "{err}");
    let err = c
        .git_access(&SourceLocation::public("codecommit::eu-west-1://infra"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("CodeCommit needs AWS credentials"), "{err}");
    let (url, auth) = c
        .git_access(&SourceLocation::public("https://github.com/a/b"))
        .await
        .unwrap();
    assert_eq!(url, "https://github.com/a/b");
    assert!(matches!(auth, GitAuth::Anonymous));
}

#[tokio::test]
async fn codecommit_is_signed_with_the_roles_keys_and_no_secret() {
    let mut c = Credentials::fixed([], "eu-west-1");
    c.aws_keys = Some(SharedCredentialsProvider::new(
        aws_credential_types::Credentials::from_keys("AKID", "SECRET", Some("TOKEN".into())),
    ));
    let (url, auth) = c
        .git_access(&SourceLocation::public("codecommit://infra"))
        .await
        .unwrap();
    assert_eq!(
        url,
        "https://git-codecommit.eu-west-1.amazonaws.com/v1/repos/infra"
    );
    let (user, password) = basic(auth);
    assert_eq!(user, "AKID%TOKEN");
    assert_eq!(password.len(), "20261123T180455Z".len() + 64);
}

#[tokio::test]
async fn a_secret_is_presented_nowhere_it_does_not_name_and_says_where_it_may_go() {
    for fields in [
        r#""token": "hunter2""#,
        r#""username": "me", "password": "hunter2""#,
        r#""sshPrivateKey": "hunter2", "knownHosts": "evil.example ssh-ed25519 AAAA""#,
        r#""appId": 1, "installationId": 2, "privateKey": "hunter2""#,
    ] {
        let c = credentials(&bound(fields));
        for url in [
            "https://evil.example/acme/infra.git",
            "ssh://git@evil.example/acme/infra.git",
            "git@evil.example:acme/infra.git",
            "https://github.com/someone-else/infra.git",
        ] {
            let err = c.git_access(&at(url)).await.unwrap_err();
            assert!(
                matches!(err, FetchError::CredentialNotForHost { ref secret, .. } if secret == ARN),
                "{fields} to {url}: {err:?}"
            );
            let err = err.to_string();
            assert!(
                err.contains(ARN) && err.contains("Nothing was sent"),
                "{err}"
            );
            assert!(!err.contains("hunter2"), "{err}");
        }
    }
}

/// The refusal of `secret` for a source at `url`, which must be
/// `CredentialNotForHost`: its message.
async fn not_for_host(secret: &str, url: &str) -> String {
    let err = credentials(secret).git_access(&at(url)).await.unwrap_err();
    assert!(
        matches!(err, FetchError::CredentialNotForHost { .. }),
        "{err:?}"
    );
    err.to_string()
}

#[tokio::test]
async fn a_github_app_s_api_url_must_be_on_one_of_its_hosts() {
    let err = not_for_host(
        &bound(
            r#""appId": 1, "installationId": 2, "privateKey": "hunter2", "apiUrl": "https://evil.example/api/v3""#,
        ),
        "https://github.com/acme/infra.git",
    )
    .await;
    assert!(err.contains("evil.example"), "{err}");
}

#[tokio::test]
async fn a_github_app_without_an_api_url_needs_github_com_among_its_hosts() {
    // Its JWT would go to api.github.com: a secret bound to an
    // Enterprise Server alone names no apiUrl there.
    let err = not_for_host(
        r#"{"appId": 1, "installationId": 2, "privateKey": "hunter2", "hosts": ["git.acme.internal"]}"#,
        "https://git.acme.internal/acme/infra.git",
    )
    .await;
    assert!(
        err.contains("api.github.com") && err.contains("apiUrl") && !err.contains("hunter2"),
        "{err}"
    );
}

#[tokio::test]
async fn a_secret_that_names_no_hosts_is_refused_before_any_connection() {
    for text in ["ghp_plain", r#"{"token": "ghp_plain"}"#] {
        let err = not_for_host(text, "https://github.com/acme/infra.git").await;
        assert!(
            err.contains("\"hosts\"") && !err.contains("ghp_plain"),
            "{err}"
        );
    }
}

#[test]
fn plain_http_is_for_this_machine_only() {
    assert!(loopback_http("http://127.0.0.1:8080/x"));
    assert!(!loopback_http("http://git.example.com/x"));
    assert!(!loopback_http("https://127.0.0.1/x"));
}
