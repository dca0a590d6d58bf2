//! The health check: every stack, on every run, at no per-stack cost.
//!
//! The registry's side is one read of a narrow index (a few hundred bytes a
//! stack); CloudFormation's is one paged `ListStacks` per account and region
//! the stacks live in (through the stack's `assumeRoleArn`), [`LISTINGS_AT_ONCE`]
//! at a time (a fleet has one per target). Each stack's
//! summary is compared in memory with what its last run recorded
//! ([`crate::seen::Seen`]): a stack that is fine costs no write, no call and
//! no execution; one changed outside stacksync (updated, replaced, deleted,
//! in another status) gets its reconcile started. (Drift detection lists
//! the stacks again, in a function of its own: [`crate::triggers::drift`].)

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use tracing::warn;

use super::judge::{Candidate, Health, judge_watched, listed_in};
use super::{Report, Scheduler};
use crate::clock::EpochMillis;
use crate::ports::{CloudFormationFactory, SourceFetcher, StackSummary, Stacks, Starter};
use crate::registry::{Entries, RegistryError, Schedule, Watched};
use crate::seen::Observed;

/// The most accounts and regions listed at once by one run.
pub const LISTINGS_AT_ONCE: usize = 16;

/// An account and region: (region, role assumed to reach the account).
pub type Target = (Option<String>, Option<String>);

/// What the check found, beyond the candidates.
#[derive(Debug, Default)]
struct Tally {
    fine: usize,
    listings: usize,
    unchecked: usize,
    slow: Vec<String>,
}

impl<R, X, S, F> Scheduler<R, X, S, F>
where
    R: Entries + Schedule,
    X: Starter,
    S: SourceFetcher + Clone + 'static,
    F: CloudFormationFactory,
{
    /// Checks every stack; adds those changed outside stacksync (and not
    /// in `taken`, already started for another reason) to `candidates`.
    pub(super) async fn check_health(
        &self,
        now: EpochMillis,
        taken: &BTreeSet<String>,
        candidates: &mut Vec<Candidate>,
        report: &mut Report,
    ) -> Result<(), RegistryError> {
        let at = Instant::now();
        let watched = self.registry.watched().await?;
        report.timing.watch_read = at.elapsed();
        report.stacks_watched = watched.len();
        let home = self.cloudformation.home_region();
        let mut by_target: BTreeMap<Target, Vec<&Watched>> = BTreeMap::new();
        let mut tally = Tally::default();
        for w in &watched {
            match listed_in(w, now) {
                Some((region, role)) => {
                    let region = region.map(str::to_owned).or_else(|| home.clone());
                    by_target
                        .entry((region, role.map(str::to_owned)))
                        .or_default()
                        .push(w);
                }
                None => self.judge(w, None, now, taken, candidates, &mut tally),
            }
        }
        // Every account and region at once (at most LISTINGS_AT_ONCE): a
        // fleet's stacks are one per account and region.
        let at = Instant::now();
        let targets: Vec<(Target, Vec<&Watched>)> = by_target.into_iter().collect();
        let listings: Vec<_> = stream::iter(&targets)
            .map(|(target, _)| list_stacks(&self.cloudformation, target))
            .buffered(LISTINGS_AT_ONCE)
            .collect()
            .await;
        report.timing.listing += at.elapsed();
        for ((target, stacks), listed) in targets.into_iter().zip(listings) {
            let listing = match listed {
                Ok(listing) => listing,
                Err(e) => {
                    // Not listed is not missing: these wait for the next run.
                    warn!(region = ?target.0, role = ?target.1, error = %e, "stacks not listed");
                    report.errors.push(format!(
                        "listing the stacks of {}: {e}",
                        describe_target(&target)
                    ));
                    tally.unchecked += stacks.len();
                    continue;
                }
            };
            tally.listings += 1;
            for w in stacks {
                let listed = listing.get(w.stack_name.as_str()).map(|s| observed(s));
                self.judge(w, listed, now, taken, candidates, &mut tally);
            }
        }
        report.stacks_fine = tally.fine;
        report.listings = tally.listings;
        report.stacks_unchecked = tally.unchecked;
        report.interval_shorter_than_period = tally.slow.len();
        self.warn_slow(&tally.slow);
        Ok(())
    }

    fn judge(
        &self,
        w: &Watched,
        listed: Option<Observed<'_>>,
        now: EpochMillis,
        taken: &BTreeSet<String>,
        candidates: &mut Vec<Candidate>,
        tally: &mut Tally,
    ) {
        match judge_watched(w, listed, now) {
            Health::Skipped => {}
            Health::Fine => {
                tally.fine += 1;
                let interval = w.seen.as_ref().map_or(0, |s| s.interval_seconds);
                if self
                    .config
                    .period
                    .is_some_and(|p| interval > 0 && Duration::from_secs(interval) < p)
                {
                    tally.slow.push(w.name.clone());
                }
            }
            Health::Start(c) if !taken.contains(&c.stack) => candidates.push(c),
            Health::Start(_) => {}
        }
    }

    fn warn_slow(&self, slow: &[String]) {
        if let (Some(period), false) = (self.config.period, slow.is_empty()) {
            warn!(
                stacks = slow.len(),
                first = ?slow.iter().take(5).collect::<Vec<_>>(),
                period_seconds = period.as_secs(),
                "these stacks ask for an interval shorter than the scheduler's period: \
                 a change outside stacksync may go unnoticed for up to the period \
                 (shorten ScheduleExpression, or lengthen their interval)"
            );
        }
    }
}

/// The period of an EventBridge `rate(…)` expression; `None` for a `cron(…)`
/// (or anything else), whose period is not one number.
pub fn schedule_period(expression: &str) -> Option<Duration> {
    let inner = expression.trim().strip_prefix("rate(")?.strip_suffix(')')?;
    let (count, unit) = inner.trim().split_once(' ')?;
    let count: u64 = count.parse().ok().filter(|n| *n > 0)?;
    let seconds = match unit.trim() {
        "minute" | "minutes" => 60,
        "hour" | "hours" => 3600,
        "day" | "days" => 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(count.checked_mul(seconds)?))
}

fn observed(s: &StackSummary) -> Observed<'_> {
    Observed {
        stack_id: &s.stack_id,
        changed_at: s.changed_at,
        status: s.status.as_str(),
        drift: s.drift.as_deref(),
    }
}

/// Every live stack of one account and region, by name.
pub async fn list_stacks<F: CloudFormationFactory>(
    factory: &F,
    target: &Target,
) -> Result<BTreeMap<String, StackSummary>, String> {
    let cfn = factory
        .for_stack(target.0.as_deref(), target.1.as_deref(), None)
        .await
        .map_err(|e| e.to_string())?;
    let stacks = cfn.list_stacks().await.map_err(|e| e.to_string())?;
    Ok(stacks.into_iter().map(|s| (s.name.clone(), s)).collect())
}

/// An account and region in words.
pub fn describe_target(target: &Target) -> String {
    format!(
        "region {} through {}",
        target.0.as_deref().unwrap_or("(default)"),
        target.1.as_deref().unwrap_or("the installation's role")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_expressions_give_their_period_and_cron_none() {
        for (expression, seconds) in [
            ("rate(5 minutes)", Some(300)),
            ("rate(1 minute)", Some(60)),
            (" rate(2 hours) ", Some(7200)),
            ("rate(1 day)", Some(86_400)),
            ("rate(0 minutes)", None),
            ("rate(5 fortnights)", None),
            ("cron(0/5 * * * ? *)", None),
            ("", None),
        ] {
            assert_eq!(
                schedule_period(expression),
                seconds.map(Duration::from_secs),
                "{expression}"
            );
        }
    }
}
