//! Rollouts in waves (`rollout:` on a fleet): the pure part. A fleet's
//! targets are cut into waves ([`plan`]): in the `order` given (a region,
//! or an organizational unit, at a time; targets in none go last), at most
//! `maxConcurrent` a wave. A target's run at a revision goes on only once
//! every target of the waves before its own has ended at that revision
//! (and `pauseBetweenWaves` has passed since), and only while no more than
//! `failureTolerance` targets have failed at it ([`gate`]): else it waits,
//! `Pending (Rollout)` or `Pending (Halted)`. Nothing is recorded of the
//! rollout itself: each target's status says where it stands, and the
//! waves follow from the fleet's record, so every run judges alike.
//! A run that ends starts the next wave's targets ([`next_starts`]).

use std::collections::BTreeMap;

use crate::clock::EpochMillis;
use crate::fleet::{target_name, targets_of};
use crate::spec::{RolloutSpec, StackSpec};
use crate::status::Phase;

/// A fleet's waves, in order, each its targets' entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub waves: Vec<Vec<String>>,
    /// How many targets may fail at a revision.
    pub tolerance: usize,
    /// Between the end of a wave and the start of the next.
    pub pause_ms: EpochMillis,
}

/// The waves of `fleet` (its spec as recorded, `units` as last read);
/// `None` when it has no `rollout:` (every target goes at once).
pub fn plan(fleet: &StackSpec, units: &BTreeMap<String, Vec<String>>) -> Option<Plan> {
    let rollout = fleet.rollout.as_ref()?;
    let targets = fleet.targets.as_ref()?;
    let mut all = targets_of(targets, units);
    let total = all.len();
    let group = |account: &str, region: &str| {
        rollout
            .order
            .iter()
            .position(|item| {
                item == region
                    || units
                        .get(item)
                        .is_some_and(|a| a.iter().any(|a| a == account))
            })
            .unwrap_or(rollout.order.len())
    };
    all.sort_by_key(|t| group(&t.account, &t.region));
    let size = rollout.max_concurrent.of(total, true).max(1);
    let mut waves: Vec<Vec<String>> = Vec::new();
    let mut last_group = None;
    for t in &all {
        let g = group(&t.account, &t.region);
        let full = waves.last().is_none_or(|w| w.len() >= size);
        if full || last_group != Some(g) {
            waves.push(Vec::new());
        }
        last_group = Some(g);
        if let Some(wave) = waves.last_mut() {
            wave.push(target_name(&fleet.name, &t.account, &t.region));
        }
    }
    Some(Plan {
        waves,
        tolerance: rollout.failure_tolerance.of(total, false),
        pause_ms: pause_ms(rollout),
    })
}

fn pause_ms(rollout: &RolloutSpec) -> EpochMillis {
    rollout
        .pause_between_waves
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 1000) * 1000)
        .unwrap_or(0)
}

/// A target as the registry says it stands now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Peer {
    /// The revision its last run worked at.
    pub revision: Option<String>,
    pub phase: Option<Phase>,
    /// When its last run ended.
    pub ended_at: Option<EpochMillis>,
    /// A run of it is under way.
    pub running: bool,
    /// Suspended or being deleted: the rollout goes on without it.
    pub out: bool,
    /// Waits for a sync window: the queue starts it then.
    pub held_by_window: bool,
}

/// Where a target stands at a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// Its run at the revision ended `Ready` (or it is left out).
    Done(EpochMillis),
    /// Its run at the revision failed.
    Failed(EpochMillis),
    /// No run at the revision has ended yet.
    Unfinished,
}

fn standing(peer: Option<&Peer>, revision: &str) -> Standing {
    // A target not registered (yet) is not the rollout's to wait for.
    let Some(peer) = peer else {
        return Standing::Done(0);
    };
    if peer.out {
        return Standing::Done(0);
    }
    let at = peer
        .revision
        .as_deref()
        .is_some_and(|r| r.eq_ignore_ascii_case(revision));
    let ended = peer.ended_at.unwrap_or(0);
    match peer.phase {
        _ if !at || peer.running => Standing::Unfinished,
        Some(p) if p.is_ready() => Standing::Done(ended),
        Some(Phase::Failed) => Standing::Failed(ended),
        _ => Standing::Unfinished,
    }
}

/// What a target's run may do at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Go,
    /// A wave before its own has not ended (`blocking`: some of its
    /// unfinished targets), or ended less than the pause ago (`until`).
    Wait {
        wave: usize,
        waves: usize,
        blocking: Vec<String>,
        until: Option<EpochMillis>,
    },
    /// More targets failed at the revision than the tolerance.
    Halted {
        failed: Vec<String>,
        tolerance: usize,
    },
}

/// The failed targets at `revision` (but `except`), and the first wave
/// one is in.
fn failures(
    plan: &Plan,
    peers: &BTreeMap<String, Peer>,
    revision: &str,
    except: Option<&str>,
) -> (Vec<String>, Option<usize>) {
    let mut failed = Vec::new();
    let mut first = None;
    for (index, wave) in plan.waves.iter().enumerate() {
        for name in wave.iter().filter(|n| Some(n.as_str()) != except) {
            if let Standing::Failed(_) = standing(peers.get(name), revision) {
                failed.push(name.clone());
                first = first.or(Some(index));
            }
        }
    }
    (failed, first)
}

/// When wave `index` ended at `revision` (its last target's end), if it did.
fn wave_ended(
    plan: &Plan,
    peers: &BTreeMap<String, Peer>,
    revision: &str,
    index: usize,
) -> Option<EpochMillis> {
    let mut last = 0;
    for name in plan.waves.get(index)? {
        match standing(peers.get(name), revision) {
            Standing::Done(at) | Standing::Failed(at) => last = last.max(at),
            Standing::Unfinished => return None,
        }
    }
    Some(last)
}

/// Whether `me`'s run at `revision` goes on. `resumed`: `stacksync
/// rollout resume` let the rollout go on past the failures at `revision`.
pub fn gate(
    plan: &Plan,
    peers: &BTreeMap<String, Peer>,
    me: &str,
    revision: &str,
    resumed: bool,
    now: EpochMillis,
) -> Gate {
    let Some(mine) = plan.waves.iter().position(|w| w.iter().any(|n| n == me)) else {
        return Gate::Go;
    };
    let (failed, first_failed) = failures(plan, peers, revision, Some(me));
    if !resumed && failed.len() > plan.tolerance && first_failed.is_some_and(|f| mine > f) {
        return Gate::Halted {
            failed,
            tolerance: plan.tolerance,
        };
    }
    let blocking: Vec<String> = plan.waves[..mine]
        .iter()
        .flatten()
        .filter(|n| standing(peers.get(*n), revision) == Standing::Unfinished)
        .cloned()
        .collect();
    let waiting = |blocking, until| Gate::Wait {
        wave: mine,
        waves: plan.waves.len(),
        blocking,
        until,
    };
    if !blocking.is_empty() {
        return waiting(blocking, None);
    }
    if mine > 0 && plan.pause_ms > 0 {
        let ended = wave_ended(plan, peers, revision, mine - 1).unwrap_or(0);
        let until = ended.saturating_add(plan.pause_ms);
        if now < until {
            return waiting(Vec::new(), Some(until));
        }
    }
    Gate::Go
}

/// The targets to start now that a run at `revision` ended: the first
/// wave not ended, those of its targets neither running nor waiting for a
/// window, and when (the pause after the wave before). `None`: halted,
/// ended, or nothing to start.
pub fn next_starts(
    plan: &Plan,
    peers: &BTreeMap<String, Peer>,
    revision: &str,
    resumed: bool,
) -> Option<(Vec<String>, EpochMillis)> {
    let (failed, _) = failures(plan, peers, revision, None);
    if !resumed && failed.len() > plan.tolerance {
        return None;
    }
    let index = (0..plan.waves.len()).find(|i| wave_ended(plan, peers, revision, *i).is_none())?;
    let names: Vec<String> = plan.waves[index]
        .iter()
        .filter(|n| {
            let peer = peers.get(*n);
            standing(peer, revision) == Standing::Unfinished
                && !peer.is_some_and(|p| p.running || p.held_by_window)
        })
        .cloned()
        .collect();
    if names.is_empty() {
        return None;
    }
    let at = match index {
        0 => 0,
        _ => wave_ended(plan, peers, revision, index - 1)
            .unwrap_or(0)
            .saturating_add(plan.pause_ms),
    };
    Some((names, at))
}

/// Where a rollout at `revision` stands, for `status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Waves ended.
    pub ended: usize,
    pub waves: usize,
    pub failed: Vec<String>,
    pub halted: bool,
}

pub fn progress(
    plan: &Plan,
    peers: &BTreeMap<String, Peer>,
    revision: &str,
    resumed: bool,
) -> Progress {
    let (failed, _) = failures(plan, peers, revision, None);
    Progress {
        ended: (0..plan.waves.len())
            .take_while(|i| wave_ended(plan, peers, revision, *i).is_some())
            .count(),
        waves: plan.waves.len(),
        halted: !resumed && failed.len() > plan.tolerance,
        failed,
    }
}

/// `names` with each rollout's targets in wave order, in the places its
/// targets held (the others where they were): what runs one entry after
/// another (`sync --local`) runs each wave before the next.
pub fn in_wave_order(names: Vec<String>, plans: &[Plan]) -> Vec<String> {
    let rank: BTreeMap<&str, (usize, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(p, plan)| {
            plan.waves
                .iter()
                .flatten()
                .enumerate()
                .map(move |(i, n)| (n.as_str(), (p, i)))
        })
        .collect();
    let places: Vec<usize> = (0..names.len())
        .filter(|i| rank.contains_key(names[*i].as_str()))
        .collect();
    let mut ranked: Vec<String> = places.iter().map(|i| names[*i].clone()).collect();
    ranked.sort_by_key(|n| rank.get(n.as_str()).copied());
    let mut out = names;
    for (place, name) in places.into_iter().zip(ranked) {
        out[place] = name;
    }
    out
}

#[cfg(test)]
mod tests;
