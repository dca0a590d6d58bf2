use super::*;

const R: &str = "abc123";

fn fleet(rollout: &str, accounts: &[&str], regions: &[&str]) -> StackSpec {
    let yaml = format!(
        "name: base\nsource: {{ git: 'https://example.org/i.git', path: b.yaml }}\n\
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/deploy'\n\
         targets: {{ accounts: {accounts:?}, organizationalUnits: [ou-abcd-12345678], regions: {regions:?} }}\n\
         rollout: {rollout}\n"
    );
    serde_yaml_ng::from_str(&yaml).unwrap_or_else(|e| panic!("{e}: {yaml}"))
}

fn units() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([(
        "ou-abcd-12345678".to_owned(),
        vec!["333333333333".to_owned()],
    )])
}

fn names(waves: &[Vec<String>]) -> Vec<Vec<String>> {
    waves
        .iter()
        .map(|w| {
            w.iter()
                .map(|n| n.trim_start_matches("base-").to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn waves_follow_the_order_and_never_mix_two_of_its_items() {
    let spec = fleet(
        "{maxConcurrent: 2, order: [eu-west-1, ou-abcd-12345678]}",
        &["111111111111", "222222222222"],
        &["us-east-1", "eu-west-1"],
    );
    let waves = plan(&spec, &units()).expect("a rollout");
    assert_eq!(
        names(&waves.waves),
        vec![
            // eu-west-1 first, two at a time...
            vec!["111111111111-eu-west-1", "222222222222-eu-west-1"],
            vec!["333333333333-eu-west-1"],
            // ...then the unit's account (its eu-west-1 target went above)...
            vec!["333333333333-us-east-1"],
            // ...then the rest.
            vec!["111111111111-us-east-1", "222222222222-us-east-1"],
        ]
    );
    assert_eq!(waves.tolerance, 0);
    // A share: 25% of 6 targets is 2 (rounded up); tolerance rounded down.
    let spec = fleet(
        "{maxConcurrent: '25%', failureTolerance: '20%', pauseBetweenWaves: 10m}",
        &["111111111111", "222222222222"],
        &["us-east-1", "eu-west-1"],
    );
    let waves = plan(&spec, &units()).expect("a rollout");
    assert_eq!(
        waves.waves.iter().map(Vec::len).collect::<Vec<_>>(),
        [2, 2, 2]
    );
    assert_eq!(waves.tolerance, 1);
    assert_eq!(waves.pause_ms, 600_000);
    let mut without = spec.clone();
    without.rollout = None;
    assert_eq!(plan(&without, &units()), None, "no rollout: all at once");
}

fn two_waves(tolerance: usize, pause_ms: i64) -> Plan {
    Plan {
        waves: vec![
            vec!["a".into(), "b".into()],
            vec!["c".into(), "d".into()],
            vec!["e".into()],
        ],
        tolerance,
        pause_ms,
    }
}

fn at(phase: Phase, ended: i64) -> Peer {
    Peer {
        revision: Some(R.into()),
        phase: Some(phase),
        ended_at: Some(ended),
        ..Peer::default()
    }
}

fn before() -> Peer {
    Peer {
        revision: Some("old".into()),
        phase: Some(Phase::Ready),
        ended_at: Some(1),
        ..Peer::default()
    }
}

/// The targets a to e: as listed, the others as the last revision left them.
fn peers(list: &[(&str, Peer)]) -> BTreeMap<String, Peer> {
    let mut all: BTreeMap<String, Peer> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|n| ((*n).to_owned(), before()))
        .collect();
    all.extend(list.iter().map(|(n, p)| ((*n).to_owned(), p.clone())));
    all
}

#[test]
fn a_target_waits_for_the_waves_before_its_own_and_the_first_wave_never_waits() {
    let plan = two_waves(0, 0);
    let all_before = peers(&[("a", before()), ("b", before()), ("c", before())]);
    assert_eq!(gate(&plan, &all_before, "a", R, false, 10), Gate::Go);
    assert_eq!(
        gate(&plan, &all_before, "c", R, false, 10),
        Gate::Wait {
            wave: 1,
            waves: 3,
            blocking: vec!["a".into(), "b".into()],
            until: None
        }
    );
    // A run of `a` at R under way is not an end.
    let mut running = at(Phase::Ready, 5);
    running.running = true;
    let first_done = peers(&[("a", running), ("b", at(Phase::Ready, 5))]);
    assert!(matches!(
        gate(&plan, &first_done, "c", R, false, 10),
        Gate::Wait { .. }
    ));
    let first_done = peers(&[("a", at(Phase::Ready, 5)), ("b", at(Phase::Ready, 7))]);
    assert_eq!(gate(&plan, &first_done, "c", R, false, 10), Gate::Go);
    // A target the rollout does not know (left the fleet) goes; one it
    // knows that is not registered (yet) is not waited for.
    assert_eq!(gate(&plan, &first_done, "zz", R, false, 10), Gate::Go);
    let mut unregistered = first_done.clone();
    unregistered.remove("c");
    unregistered.remove("d");
    assert_eq!(gate(&plan, &unregistered, "e", R, false, 10), Gate::Go);
    // Suspended, or not registered: not waited for.
    let out = Peer {
        out: true,
        ..before()
    };
    let one_out = peers(&[("a", at(Phase::Ready, 5)), ("b", out)]);
    assert_eq!(gate(&plan, &one_out, "d", R, false, 10), Gate::Go);
}

#[test]
fn the_pause_counts_from_the_last_end_of_the_wave_before() {
    let plan = two_waves(0, 100);
    let ended = peers(&[("a", at(Phase::Ready, 5)), ("b", at(Phase::Ready, 50))]);
    assert_eq!(
        gate(&plan, &ended, "c", R, false, 60),
        Gate::Wait {
            wave: 1,
            waves: 3,
            blocking: Vec::new(),
            until: Some(150)
        }
    );
    assert_eq!(gate(&plan, &ended, "c", R, false, 150), Gate::Go);
    assert_eq!(
        next_starts(&plan, &ended, R, false),
        Some((vec!["c".into(), "d".into()], 150))
    );
}

#[test]
fn past_the_tolerance_later_waves_halt_and_resume_lets_them_go() {
    let plan = two_waves(0, 0);
    let one_failed = peers(&[("a", at(Phase::Failed, 5)), ("b", at(Phase::Ready, 5))]);
    let halted = Gate::Halted {
        failed: vec!["a".into()],
        tolerance: 0,
    };
    assert_eq!(gate(&plan, &one_failed, "c", R, false, 10), halted);
    assert_eq!(gate(&plan, &one_failed, "e", R, false, 10), halted);
    // The failed target's own retry, and its wave, are not held.
    assert_eq!(gate(&plan, &one_failed, "a", R, false, 10), Gate::Go);
    assert_eq!(gate(&plan, &one_failed, "b", R, false, 10), Gate::Go);
    assert_eq!(next_starts(&plan, &one_failed, R, false), None);
    let p = progress(&plan, &one_failed, R, false);
    assert!(p.halted);
    assert_eq!((p.ended, p.waves, p.failed.len()), (1, 3, 1));
    // Resumed: the failure ends its wave like a success.
    assert_eq!(gate(&plan, &one_failed, "c", R, true, 10), Gate::Go);
    assert_eq!(
        next_starts(&plan, &one_failed, R, true),
        Some((vec!["c".into(), "d".into()], 5))
    );
    // Within the tolerance, the rollout goes on.
    assert_eq!(
        gate(&two_waves(1, 0), &one_failed, "c", R, false, 10),
        Gate::Go
    );
    // A fix pushed (a new revision): the failure was at R, not at R2.
    assert!(matches!(
        gate(&plan, &one_failed, "c", "r2", false, 10),
        Gate::Wait { .. }
    ));
}

#[test]
fn the_next_starts_are_the_first_unended_waves_idle_targets() {
    let plan = two_waves(0, 0);
    let mut running = before();
    running.running = true;
    let mut windowed = before();
    windowed.held_by_window = true;
    let mid = peers(&[
        ("a", at(Phase::Ready, 5)),
        ("b", at(Phase::Ready, 6)),
        ("c", running),
        ("d", before()),
    ]);
    assert_eq!(
        next_starts(&plan, &mid, R, false),
        Some((vec!["d".into()], 6))
    );
    let held = peers(&[
        ("a", at(Phase::Ready, 5)),
        ("b", at(Phase::Ready, 6)),
        ("c", windowed),
        ("d", at(Phase::Ready, 9)),
    ]);
    assert_eq!(
        next_starts(&plan, &held, R, false),
        None,
        "the window's queue starts c"
    );
    let all = peers(&[
        ("a", at(Phase::Ready, 5)),
        ("b", at(Phase::Ready, 6)),
        ("c", at(Phase::Ready, 9)),
        ("d", at(Phase::Drifted, 9)),
        ("e", at(Phase::Ready, 12)),
    ]);
    assert_eq!(next_starts(&plan, &all, R, false), None, "rolled out");
    assert_eq!(
        progress(&plan, &all, R, false),
        Progress {
            ended: 3,
            waves: 3,
            failed: Vec::new(),
            halted: false
        }
    );
}

#[test]
fn one_after_another_each_wave_runs_before_the_next() {
    let plan = two_waves(0, 0);
    let names: Vec<String> = ["x", "e", "c", "y", "a", "d", "b"]
        .iter()
        .map(|n| (*n).to_owned())
        .collect();
    assert_eq!(
        in_wave_order(names, &[plan]),
        ["x", "a", "b", "y", "c", "d", "e"]
    );
}
