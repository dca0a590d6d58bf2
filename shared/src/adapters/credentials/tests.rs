use super::*;

const ARN: &str = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:git-AbCdEf";

fn credentials(secret: &str) -> Credentials {
    Credentials::fixed([(ARN.to_owned(), secret.to_owned())], "eu-west-1")
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
    let c = credentials("ghp_abc");
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

    let c = credentials(r#"{"token": "t0k", "username": "ci-bot"}"#);
    let (_, auth) = c
        .git_access(&at("https://git.acme.internal/infra.git"))
        .await
        .unwrap();
    assert_eq!(basic(auth), ("ci-bot".into(), "t0k".into()));
}

#[tokio::test]
async fn a_token_for_a_host_of_unknown_convention_asks_for_a_user_name_without_showing_it() {
    let c = credentials("hunter2");
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
    let c = credentials(r#"{"username": "me", "password": "pw"}"#);
    let (_, auth) = c
        .git_access(&at("https://bitbucket.org/acme/infra.git"))
        .await
        .unwrap();
    assert_eq!(basic(auth), ("me".into(), "pw".into()));
    let c = credentials(r#"{"sshPrivateKey": "KEY", "knownHosts": "host ssh-ed25519 AAAA"}"#);
    let (_, auth) = c
        .git_access(&at("git@github.com:acme/infra.git"))
        .await
        .unwrap();
    assert!(matches!(auth, GitAuth::SshKey(k) if k.known_hosts.starts_with("host")));
}

#[tokio::test]
async fn nothing_of_a_secret_shows_in_debug_output() {
    let c = credentials(r#"{"username": "me", "password": "hunter2"}"#);
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

#[test]
fn plain_http_is_for_this_machine_only() {
    assert!(loopback_http("http://127.0.0.1:8080/x"));
    assert!(!loopback_http("http://git.example.com/x"));
    assert!(!loopback_http("https://127.0.0.1/x"));
}
