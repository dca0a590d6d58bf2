use super::*;
use crate::clock::parse_rfc3339;

fn at(text: &str) -> EpochMillis {
    parse_rfc3339(text).unwrap_or_else(|| panic!("{text}"))
}

fn window(yaml: &str) -> Window {
    let spec: WindowSpec = serde_yaml_ng::from_str(yaml).expect("a window");
    Window::checked(&spec, at("2026-11-27T00:00:00Z")).expect("a good window")
}

fn refused(yaml: &str) -> String {
    let spec: WindowSpec = serde_yaml_ng::from_str(yaml).expect("a window");
    Window::checked(&spec, at("2026-11-27T00:00:00Z")).expect_err("refused")
}

#[test]
fn cron_fields_read_as_crontab_reads_them() {
    let cron = Cron::parse("*/15 8-17 * JAN,jul-aug mon-FRI").expect("parses");
    let monday = jiff::civil::date(2026, 1, 5);
    let saturday = jiff::civil::date(2026, 1, 10);
    let march = jiff::civil::date(2026, 3, 2);
    assert!(cron.matches_day(monday));
    assert!(!cron.matches_day(saturday));
    assert!(!cron.matches_day(march), "not in the months named");
    let times: Vec<String> = cron.times_on(monday).map(|t| t.to_string()).collect();
    assert_eq!(times.len(), 10 * 4);
    assert_eq!(times[0], "2026-01-05T08:00:00");
    assert_eq!(times[39], "2026-01-05T17:45:00");
    // Sunday as 7, and both day fields restricted: either matches.
    let either = Cron::parse("0 0 1 * 7").expect("parses");
    assert!(
        either.matches_day(jiff::civil::date(2026, 1, 4)),
        "a Sunday"
    );
    assert!(either.matches_day(jiff::civil::date(2026, 1, 1)), "the 1st");
    assert!(!either.matches_day(jiff::civil::date(2026, 1, 2)));
    // `a/n`: from a to the end.
    let from = Cron::parse("50/5 * * * *").expect("parses");
    let minutes: Vec<i8> = from.times_on(monday).take(2).map(|t| t.minute()).collect();
    assert_eq!(minutes, [50, 55]);
}

#[test]
fn a_bad_cron_says_which_field_and_why() {
    let cases = [
        ("0 8 * *", "has 4 field(s): a cron expression has 5"),
        ("0 8 * * * 2026", "has 6 field(s)"),
        ("60 8 * * *", "the minute \"60\" names 60, outside 0-59"),
        ("0 24 * * *", "the hour \"24\" names 24, outside 0-23"),
        (
            "0 8 0 * *",
            "the day of the month \"0\" names 0, outside 1-31",
        ),
        ("0 8 * FOO *", "neither a number nor one of JAN, FEB"),
        ("0 8 * * FRI-MON", "runs from 5 down to 1"),
        (
            "*/0 8 * * *",
            "a step \"0\" that is not a whole number above 0",
        ),
        ("x 8 * * *", "has \"x\", which is not a number"),
    ];
    for (text, said) in cases {
        let why = Cron::parse(text).expect_err(text);
        assert!(why.contains(said), "{text}: {why}");
        assert!(why.contains(&format!("{text:?}")), "{text}: {why}");
    }
}

#[test]
fn a_bad_window_is_refused_with_what_to_write() {
    for (yaml, said) in [
        ("{duration: 1h}", "names neither allow nor deny"),
        (
            "{allow: '0 8 * * *', deny: '0 9 * * *', duration: 1h}",
            "names both allow and deny",
        ),
        ("{allow: '0 8 * * *', duration: 30s}", "lasts at least 1m"),
        ("{allow: '0 8 * * *', duration: 32d}", "at most 31d"),
        (
            "{allow: '0 8 * * *', duration: 1h, timeZone: Mars/Olympus}",
            "\"Mars/Olympus\", which is not an IANA time zone",
        ),
        ("{allow: '0 0 31 2 *', duration: 1h}", "never starts"),
    ] {
        let why = refused(yaml);
        assert!(why.contains(said), "{yaml}: {why}");
    }
    let unknown =
        serde_yaml_ng::from_str::<WindowSpec>("{allow: '* * * * *', duration: 1h, zone: UTC}");
    assert!(unknown.is_err(), "unknown fields are refused");
}

#[test]
fn an_allowed_window_holds_runs_until_it_opens_in_its_time_zone() {
    let allow = [window(
        "{allow: '0 8 * * MON-FRI', duration: 10h, timeZone: Europe/Berlin}",
    )];
    // Friday 2026-11-27, 12:00 in Berlin (UTC+1): inside.
    assert_eq!(judge(&[&allow], at("2026-11-27T11:00:00Z")), Verdict::Open);
    // 18:00 in Berlin: closed until Monday 08:00 Berlin.
    let Verdict::Closed { why, opens } = judge(&[&allow], at("2026-11-27T17:00:00Z")) else {
        panic!("closed after 18:00");
    };
    assert!(
        why.contains(
            "outside the allowed sync window(s) allow \"0 8 * * MON-FRI\" for 10h (Europe/Berlin)"
        ),
        "{why}"
    );
    assert_eq!(opens, Some(at("2026-11-30T07:00:00Z")));
    // The window's end is not inside it.
    assert!(matches!(
        judge(&[&allow], at("2026-11-27T17:00:00Z") - 1),
        Verdict::Open
    ));
}

#[test]
fn a_denied_window_holds_runs_until_it_ends_across_midnight_and_daylight_saving() {
    let deny = [window(
        "{deny: '0 22 * * SAT', duration: 8h, timeZone: Europe/Berlin}",
    )];
    // Saturday 2026-03-28 22:00 Berlin (UTC+1) to Sunday 07:00 Berlin (UTC+2,
    // clocks went forward at 02:00): 8 hours later is 07:00 local, 05:00Z.
    let inside = at("2026-03-29T01:30:00Z");
    assert_eq!(
        judge(&[&deny], inside),
        Verdict::Closed {
            why: "inside the denied sync window deny \"0 22 * * SAT\" for 8h (Europe/Berlin)"
                .into(),
            opens: Some(at("2026-03-29T05:00:00Z")),
        }
    );
    assert_eq!(judge(&[&deny], at("2026-03-29T05:00:00Z")), Verdict::Open);
    assert_eq!(judge(&[&deny], at("2026-03-28T20:59:59Z")), Verdict::Open);
}

#[test]
fn a_start_in_a_daylight_saving_gap_starts_past_it() {
    let w = window("{allow: '30 2 * * *', duration: 1h, timeZone: Europe/Berlin}");
    // 02:30 does not exist on 2026-03-29 in Berlin: 03:30 CEST, 01:30Z.
    assert_eq!(
        w.next_start(at("2026-03-29T00:00:00Z")),
        Some(at("2026-03-29T01:30:00Z"))
    );
}

#[test]
fn every_level_must_let_a_run_go_on() {
    // The installation allows weekdays 08:00-18:00 UTC; the entry denies
    // 12:00-14:00 UTC every day.
    let installation = [window("{allow: '0 8 * * 1-5', duration: 10h}")];
    let entry = [window("{deny: '0 12 * * *', duration: 2h}")];
    let levels: [&[Window]; 2] = [&installation, &entry];
    assert_eq!(judge(&levels, at("2026-11-27T09:00:00Z")), Verdict::Open);
    let Verdict::Closed { why, opens } = judge(&levels, at("2026-11-27T12:30:00Z")) else {
        panic!("the entry's denial holds");
    };
    assert!(
        why.starts_with("inside the denied sync window deny"),
        "{why}"
    );
    assert_eq!(opens, Some(at("2026-11-27T14:00:00Z")));
    // Friday 17:30: the next opening is Monday 08:00, not 14:00 on Saturday.
    let Verdict::Closed { opens, .. } = judge(&levels, at("2026-11-27T18:30:00Z")) else {
        panic!("closed in the evening");
    };
    assert_eq!(opens, Some(at("2026-11-30T08:00:00Z")));
    // Two levels that never agree: no opening.
    let never = [window("{deny: '0 8 * * 1-5', duration: 10h}")];
    let levels: [&[Window]; 2] = [&installation, &never];
    let Verdict::Closed { opens, .. } = judge(&levels, at("2026-11-27T09:00:00Z")) else {
        panic!("closed");
    };
    assert_eq!(opens, None);
    assert!(describe("closed", None).contains("no opening found"));
}

#[test]
fn parse_all_names_the_window_at_fault() {
    let specs: Vec<WindowSpec> = serde_yaml_ng::from_str(
        "[{allow: '0 8 * * *', duration: 1h}, {deny: '0 8 * *', duration: 1h}]",
    )
    .expect("windows");
    let why = parse_all(&specs, at("2026-11-27T00:00:00Z")).expect_err("refused");
    assert!(
        why.starts_with("windows[1]: \"0 8 * *\" has 4 field(s)"),
        "{why}"
    );
}

#[test]
fn the_installations_windows_read_from_its_parameter() {
    let now = at("2026-11-27T00:00:00Z");
    assert!(installation_windows("  ", now).expect("none").is_empty());
    let windows = installation_windows(
        r#"[{"deny": "0 0 24 12 *", "duration": "2d", "timeZone": "Europe/Berlin"}]"#,
        now,
    )
    .expect("one window");
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].kind(), Kind::Deny);
    let why = installation_windows("{deny: x}", now).expect_err("not a list");
    assert!(
        why.starts_with("SyncWindows (STACKSYNC_WINDOWS): "),
        "{why}"
    );
    assert!(why.contains("write a list of windows"), "{why}");
    let why = installation_windows(r#"[{"allow": "0 8 * *", "duration": "1h"}]"#, now)
        .expect_err("a bad cron");
    assert!(
        why.contains("windows[0]: \"0 8 * *\" has 4 field(s)"),
        "{why}"
    );
}

#[test]
fn windows_that_touch_are_one_hold_however_many_they_are() {
    // A denial written minute by minute, 08:00-17:59: one hold to 18:00,
    // not a day's wait (the window would be looked at 600 times).
    let deny = [window("{deny: '* 8-17 * * *', duration: 1m}")];
    assert_eq!(
        judge(&[&deny], at("2026-11-27T08:30:00Z")),
        Verdict::Closed {
            why: "inside the denied sync window deny \"* 8-17 * * *\" for 1m (UTC)".into(),
            opens: Some(at("2026-11-27T18:00:00Z")),
        }
    );
    // One that never ends: no opening, found quickly.
    let always = [window("{deny: '* * * * *', duration: 1m}")];
    let started = std::time::Instant::now();
    let Verdict::Closed { opens, .. } = judge(&[&always], at("2026-11-27T08:30:00Z")) else {
        panic!("always closed");
    };
    assert_eq!(opens, None);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}
