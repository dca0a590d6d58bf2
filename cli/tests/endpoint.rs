//! A bad endpoint (`--endpoint-url`, `AWS_ENDPOINT_URL`,
//! `AWS_ENDPOINT_URL_<SERVICE>`) is refused in one line that names where it
//! was given, before any AWS call: no emulator needed.
#![allow(clippy::unwrap_used)]

use std::process::Command;

/// `stacksync status` with `args` before it and only `env` set (keys,
/// region, no profile files): its exit code and stderr.
fn status(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stacksync"))
        .args(args)
        .args(["--table", "t", "status"])
        .env_clear()
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "a")
        .env("AWS_SECRET_ACCESS_KEY", "b")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        // One attempt: a refused connection is not retried.
        .env("AWS_MAX_ATTEMPTS", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One line, `error: ` then where it was given and the value, no SDK dump.
fn assert_refused(case: &str, (code, err): (Option<i32>, String), source: &str, value: &str) {
    assert_eq!(code, Some(1), "{case}: exit 1: {err}");
    assert_eq!(err.lines().count(), 1, "{case}: one line: {err}");
    assert!(
        !err.contains("Request {") && !err.contains("SdkBody") && !err.contains("panicked"),
        "{case}: no SDK dump: {err}"
    );
    let expected = format!(
        "error: {source} {value:?} is not a URL: it needs a scheme (http:// or https://) and a \
         host, like http://127.0.0.1:5000"
    );
    assert_eq!(err.trim_end(), expected, "{case}");
}

#[test]
fn a_bad_endpoint_url_is_refused_in_one_line_naming_the_flag() {
    for value in [
        "notaurl",
        "localhost:5000",
        "127.0.0.1:5000",
        "ftp://127.0.0.1:5000",
        "http://",
        "",
    ] {
        assert_refused(
            value,
            status(&["--endpoint-url", value], &[]),
            "--endpoint-url",
            value,
        );
    }
}

#[test]
fn a_bad_endpoint_in_the_environment_is_refused_in_one_line_naming_the_variable() {
    for var in ["AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"] {
        for value in ["notaurl", ""] {
            assert_refused(
                &format!("{var}={value}"),
                status(&[], &[(var, value)]),
                var,
                value,
            );
        }
    }
}

#[test]
fn the_flag_wins_over_the_environment_and_a_good_endpoint_goes_through() {
    // Nothing listens there: the call is made, and fails as a connection.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    for (args, env) in [
        (vec!["--endpoint-url", endpoint.as_str()], vec![]),
        (vec![], vec![("AWS_ENDPOINT_URL", endpoint.as_str())]),
        // The SDK itself takes the flag over the environment.
        (
            vec!["--endpoint-url", endpoint.as_str()],
            vec![("AWS_ENDPOINT_URL", "notaurl")],
        ),
    ] {
        let (code, err) = status(&args, &env);
        assert_eq!(code, Some(1), "{args:?} {env:?}: {err}");
        assert!(
            err.contains("cannot connect (Connection refused"),
            "{args:?} {env:?}: {err}"
        );
    }
}
