use super::*;

fn outputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn a_path_names_one_parameter_per_output_within_ssms_rules() {
    assert_eq!(check_path("/baseline/{output}"), Ok(()));
    assert_eq!(
        parameter_name("/baseline/{output}", "VpcId"),
        "/baseline/VpcId"
    );
    assert_eq!(fixed_prefix("/baseline/{output}"), "/baseline/");
    for (path, said) in [
        ("baseline/{output}", "must start with /"),
        ("/baseline/VpcId", "names no {output}"),
        ("/base line/{output}", "holds ' '"),
        ("/aws/{output}", "starts with /aws or /ssm"),
        ("/SSM/x/{output}", "starts with /aws or /ssm"),
        ("/a//{output}", "an empty level"),
        (
            &format!("/{}{{output}}", "a/".repeat(15)),
            "more than 15 levels",
        ),
        (&format!("/{}/{{output}}", "a".repeat(800)), "too long"),
    ] {
        let why = check_path(path).expect_err(path);
        assert!(why.contains(said), "{path}: {why}");
    }
}

#[test]
fn only_changed_outputs_are_written_and_gone_ones_deleted() {
    let path = Some("/app/{output}");
    let first = plan(
        path,
        &outputs(&[("Url", "https://a"), ("Arn", "arn:1")]),
        &BTreeMap::new(),
    );
    assert_eq!(first.put.len(), 2);
    assert!(first.delete.is_empty());
    // The same outputs again: nothing to do.
    let again = plan(
        path,
        &outputs(&[("Url", "https://a"), ("Arn", "arn:1")]),
        &first.record,
    );
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(again.record, first.record);
    // One changed, one gone, one new.
    let next = plan(
        path,
        &outputs(&[("Url", "https://b"), ("Queue", "q")]),
        &first.record,
    );
    assert_eq!(
        next.put,
        [
            ("/app/Queue".to_owned(), "q".to_owned()),
            ("/app/Url".to_owned(), "https://b".to_owned())
        ]
    );
    assert_eq!(next.delete, ["/app/Arn"]);
    // `publish:` removed, or moved: the old ones go.
    let none = plan(None, &outputs(&[("Url", "https://b")]), &next.record);
    assert_eq!(none.delete, ["/app/Queue", "/app/Url"]);
    assert!(none.record.is_empty());
    let moved = plan(
        Some("/v2/{output}"),
        &outputs(&[("Url", "https://b")]),
        &next.record,
    );
    assert_eq!(moved.put, [("/v2/Url".to_owned(), "https://b".to_owned())]);
    assert_eq!(moved.delete, ["/app/Queue", "/app/Url"]);
}

#[test]
fn secrets_empty_and_oversized_outputs_are_not_published() {
    let big = "x".repeat(MAX_VALUE_BYTES + 1);
    let recorded = BTreeMap::from([("/app/Password".to_owned(), "old".to_owned())]);
    let p = plan(
        Some("/app/{output}"),
        &outputs(&[
            ("Password", crate::parameters::MASKED_OUTPUT),
            ("Empty", ""),
            ("Big", &big),
            ("Ok", "v"),
        ]),
        &recorded,
    );
    assert_eq!(p.put, [("/app/Ok".to_owned(), "v".to_owned())]);
    assert_eq!(
        p.delete,
        ["/app/Password"],
        "a secret is never left published"
    );
    assert_eq!(
        p.skipped,
        [
            "Big (it is longer than 4 KB)",
            "Empty (it is empty)",
            "Password (it holds a secret the run read)"
        ]
    );
    assert!(!p.record.values().any(|h| h.contains('v') && h.len() < 16));
}
