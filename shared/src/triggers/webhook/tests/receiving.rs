//! Size, sender, signature: what `receive` refuses before parsing.

use super::*;

#[test]
fn headers_are_found_in_any_case_and_blank_ones_are_absent() {
    let h: Headers = [
        ("x-github-event", " push "),
        ("X-Empty", "  "),
        ("X-Twice", "first"),
        ("x-twice", "second"),
    ]
    .into_iter()
    .collect();
    assert_eq!(h.get("X-GitHub-Event"), Some("push"));
    assert_eq!(h.get("X-GITHUB-EVENT"), Some("push"));
    assert_eq!(h.get("x-empty"), None);
    assert_eq!(h.get("x-missing"), None);
    assert_eq!(h.get("X-Twice"), Some("first"));
}

// ------------------------------------------------------ provider detection

#[test]
fn each_fixture_is_told_by_its_headers() {
    let expected = [
        ("github-push", Provider::GitHub),
        ("gitlab-push", Provider::GitLab),
        ("bitbucket-push", Provider::Bitbucket),
        ("generic-push", Provider::Generic),
    ];
    for (name, provider) in expected {
        assert_eq!(Fixture::load(name).provider(), provider, "{name}");
    }
}

#[test]
fn an_unknown_sender_is_a_clear_400() {
    let d = Fixture::load("github-push")
        .signed()
        .without("X-GitHub-Event");
    let message = malformed(d.receive());
    assert!(message.contains("unknown webhook sender"), "{message}");
    assert!(message.contains("X-GitHub-Event"), "{message}");
}

#[test]
fn bitbucket_server_without_a_uuid_header_is_not_taken_for_bitbucket_cloud() {
    let h: Headers = [
        ("X-Event-Key", "repo:refs_changed"),
        ("X-Request-Id", "abc"),
    ]
    .into_iter()
    .collect();
    assert!(Provider::detect(&h).is_err());
    let h: Headers = [("X-Event-Key", "repo:push"), ("X-Hook-UUID", "abc")]
        .into_iter()
        .collect();
    assert_eq!(Provider::detect(&h).unwrap(), Provider::Bitbucket);
}

// ------------------------------------------------------------- verification

#[test]
fn a_valid_signature_is_accepted_for_each_provider() {
    for (name, _) in SIGNED_FIXTURES {
        let event = Fixture::load(name).signed().receive();
        assert!(matches!(event, Ok(Received::Push(_))), "{name}: {event:?}");
    }
}

#[test]
fn the_previous_secret_is_accepted_during_rotation() {
    for (name, _) in SIGNED_FIXTURES {
        let d = Fixture::load(name).signed_with(SECRET);
        let event = receive(&d.headers(), &d.body, &[NEXT_SECRET, SECRET]);
        assert!(matches!(event, Ok(Received::Push(_))), "{name}: {event:?}");
        let d = Fixture::load(name).signed_with(NEXT_SECRET);
        let event = receive(&d.headers(), &d.body, &[NEXT_SECRET, SECRET]);
        assert!(matches!(event, Ok(Received::Push(_))), "{name}: {event:?}");
    }
}

#[test]
fn a_missing_signature_is_refused_naming_the_header() {
    for (name, header) in SIGNED_FIXTURES {
        let message = unauthorized(Fixture::load(name).receive());
        assert!(
            message.contains(&format!("{header} is missing")),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_wrong_secret_is_refused_for_each_provider() {
    for (name, header) in SIGNED_FIXTURES {
        let message = unauthorized(Fixture::load(name).signed_with(b"guessed").receive());
        assert!(message.contains(header), "{name}: {message}");
        assert!(!message.contains("whsec"), "{name}: {message}");
    }
}

#[test]
fn a_signature_of_another_body_is_refused() {
    for (name, header) in SIGNED_FIXTURES {
        if name == "gitlab-push" {
            continue; // GitLab's token does not cover the body.
        }
        let d = Fixture::load(name);
        let mut other = d.body.clone();
        other.extend_from_slice(b" ");
        let message = unauthorized(d.signed_over(SECRET, &other).receive());
        assert!(
            message.contains(&format!("{header} does not match the body")),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_signature_with_a_bad_prefix_or_length_is_refused() {
    let d = Fixture::load("github-push");
    let good = sign(SECRET, &d.body);
    let hex = good.trim_start_matches("sha256=");
    for (value, expected) in [
        (format!("sha1={hex}"), "must start with `sha256=`"),
        (hex.to_owned(), "must start with `sha256=`"),
        (format!("sha256={}", &hex[..40]), "not 40"),
        (format!("sha256={}", "x".repeat(64)), "not hexadecimal"),
    ] {
        let d = Fixture::load("github-push").with("X-Hub-Signature-256", &value);
        let message = unauthorized(d.receive());
        assert!(message.contains(expected), "{value}: {message}");
    }
}

#[test]
fn verification_comes_before_parsing() {
    let d = Fixture {
        headers: vec![("X-GitHub-Event".into(), "push".into())],
        body: b"not json".to_vec(),
    };
    unauthorized(d.receive());
}

// ------------------------------------------------------------- size limit

#[test]
fn a_body_over_the_limit_is_413_before_anything_else() {
    let body = vec![b' '; MAX_BODY_BYTES + 1];
    let err = receive(&Headers::new(), &body, &[SECRET]).unwrap_err();
    assert_eq!(err.status_code(), 413);
    assert_eq!(
        err,
        WebhookError::TooLarge {
            size: MAX_BODY_BYTES + 1,
            limit: MAX_BODY_BYTES
        }
    );
    assert!(check_size(&body[..MAX_BODY_BYTES]).is_ok());
}

// ------------------------------------------------------------------ GitHub
