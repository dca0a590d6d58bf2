//! Sync windows: when runs may change stacks. A window starts at each time
//! its cron expression names (in its time zone) and lasts its duration.
//! Runs may go on only inside one of the allowed windows (when there are
//! any) and outside every denied one; each level (the installation's
//! `SyncWindows`, an entry's `windows:`) is a rule of its own, and a run
//! goes on only when every level lets it.
//!
//! A start that falls in a daylight-saving gap (02:30 on the night clocks
//! go forward) starts at the same offset past the gap (03:30); one that
//! falls twice (the night they go back) starts at the first.

use jiff::civil::Date;
use jiff::tz::TimeZone;

use crate::clock::{EpochMillis, rfc3339};
use crate::spec::WindowSpec;

mod cron;

pub use cron::Cron;

/// The longest a window may last.
pub const MAX_WINDOW: crate::duration::Duration = crate::duration::Duration::from_secs(31 * 86_400);
/// How far ahead a window's next start is looked for: a window that does not
/// start in this long (`0 0 31 2 *`) is refused.
const HORIZON_DAYS: i32 = 5 * 366;
/// How many windows in a row a run's next chance may skip.
const MAX_HOPS: usize = 200;
/// How far ahead touching occurrences of one window are merged into one
/// hold (a window that holds longer is looked at again from there).
const MERGE_DAYS: i32 = 60;
/// How far ahead an opening is looked for.
const HORIZON_MS: i64 = 5 * 366 * 86_400_000;

/// Allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Allow,
    Deny,
}

/// One window, parsed.
#[derive(Debug, Clone)]
pub struct Window {
    kind: Kind,
    cron: Cron,
    duration_ms: i64,
    zone: TimeZone,
    /// As people wrote it: `deny "0 12 * * *" for 2h (Europe/Berlin)`.
    label: String,
}

/// Whether runs may go on now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Open,
    /// Not now: `why` (which window), and when runs may go on (`None`: not
    /// within five years, or more windows in a row than are looked at).
    Closed {
        why: String,
        opens: Option<EpochMillis>,
    },
}

impl Window {
    /// Parses one written window; the error says what is wrong (without the
    /// field's place, which the caller names).
    pub fn parse(spec: &WindowSpec) -> Result<Self, String> {
        let (kind, text) = match (&spec.allow, &spec.deny) {
            (Some(a), None) => (Kind::Allow, a),
            (None, Some(d)) => (Kind::Deny, d),
            (Some(_), Some(_)) => {
                return Err("names both allow and deny: write two windows".into());
            }
            (None, None) => {
                return Err(
                    "names neither allow nor deny: write `allow: CRON` or `deny: CRON`".into(),
                );
            }
        };
        let cron = Cron::parse(text)?;
        let secs = spec.duration.as_secs();
        if secs < 60 || secs > MAX_WINDOW.as_secs() {
            return Err(format!(
                "lasts {}: a window lasts at least 1m and at most {MAX_WINDOW}",
                spec.duration
            ));
        }
        let name = spec.time_zone.as_deref().unwrap_or("UTC");
        let zone = TimeZone::get(name).map_err(|_| {
            format!(
                "has the time zone {name:?}, which is not an IANA time zone (like Europe/Berlin)"
            )
        })?;
        let kind_word = match kind {
            Kind::Allow => "allow",
            Kind::Deny => "deny",
        };
        Ok(Self {
            kind,
            cron,
            duration_ms: i64::try_from(secs * 1000).unwrap_or(i64::MAX),
            zone,
            label: format!("{kind_word} {text:?} for {} ({name})", spec.duration),
        })
    }

    /// [`Window::parse`], and refused when it never starts.
    pub fn checked(spec: &WindowSpec, now: EpochMillis) -> Result<Self, String> {
        let window = Self::parse(spec)?;
        if window.next_start(now).is_none() {
            return Err(format!(
                "{}: never starts (no such day in the next five years)",
                window.label
            ));
        }
        Ok(window)
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// The window's local date of `at`.
    fn date(&self, at: EpochMillis) -> Option<Date> {
        let ts = jiff::Timestamp::from_millisecond(at).ok()?;
        Some(ts.to_zoned(self.zone.clone()).date())
    }

    /// Its starts on `date`, as instants.
    fn starts_on(&self, date: Date) -> impl Iterator<Item = EpochMillis> + '_ {
        let times = self
            .cron
            .matches_day(date)
            .then(|| self.cron.times_on(date));
        times.into_iter().flatten().filter_map(|t| {
            let zoned = self.zone.to_ambiguous_zoned(t).compatible().ok()?;
            Some(zoned.timestamp().as_millisecond())
        })
    }

    /// When the window that holds `at` ends: occurrences that overlap or
    /// touch are one hold (a window written minute by minute, `* 8-17 * *
    /// *` for 1m, holds to 18:00), looked at up to 60 days ahead.
    pub fn holding(&self, at: EpochMillis) -> Option<EpochMillis> {
        let mut day = self
            .date(at.saturating_sub(self.duration_ms))?
            .yesterday()
            .ok()?;
        let last = self
            .date(at)?
            .checked_add(jiff::Span::new().days(MERGE_DAYS))
            .ok()?;
        let mut end: Option<EpochMillis> = None;
        while day <= last {
            for start in self.starts_on(day) {
                let ends = start.saturating_add(self.duration_ms);
                match end {
                    None if start > at => return None,
                    None if at < ends => end = Some(ends),
                    None => {}
                    Some(e) if start <= e => end = Some(e.max(ends)),
                    Some(e) => return Some(e),
                }
            }
            day = day.tomorrow().ok()?;
        }
        end
    }

    /// The first start after `at`.
    pub fn next_start(&self, at: EpochMillis) -> Option<EpochMillis> {
        let mut day = self.date(at)?.yesterday().ok()?;
        for _ in 0..HORIZON_DAYS {
            if let Some(start) = self.starts_on(day).find(|s| *s > at) {
                return Some(start);
            }
            day = day.tomorrow().ok()?;
        }
        None
    }
}

/// One level's windows: when they let runs go on, from `at`.
fn level_opens(windows: &[Window], mut at: EpochMillis) -> Option<EpochMillis> {
    let allows: Vec<&Window> = windows.iter().filter(|w| w.kind == Kind::Allow).collect();
    let horizon = at.saturating_add(HORIZON_MS);
    for _ in 0..MAX_HOPS {
        if at > horizon {
            return None;
        }
        let denied = windows
            .iter()
            .filter(|w| w.kind == Kind::Deny)
            .filter_map(|w| w.holding(at))
            .max();
        if let Some(end) = denied {
            at = end;
            continue;
        }
        if allows.is_empty() || allows.iter().any(|w| w.holding(at).is_some()) {
            return Some(at);
        }
        at = allows.iter().filter_map(|w| w.next_start(at)).min()?;
    }
    None
}

/// Why one level holds runs at `at`, if it does.
fn level_closed(windows: &[Window], at: EpochMillis) -> Option<String> {
    if let Some(deny) = windows
        .iter()
        .find(|w| w.kind == Kind::Deny && w.holding(at).is_some())
    {
        return Some(format!("inside the denied sync window {}", deny.label));
    }
    let allows: Vec<&str> = windows
        .iter()
        .filter(|w| w.kind == Kind::Allow)
        .map(Window::label)
        .collect();
    let inside = windows
        .iter()
        .any(|w| w.kind == Kind::Allow && w.holding(at).is_some());
    (!allows.is_empty() && !inside)
        .then(|| format!("outside the allowed sync window(s) {}", allows.join(", ")))
}

/// Whether runs may go on at `now` under every level of `levels` (the
/// installation's windows, the entry's), and if not, why and when.
pub fn judge(levels: &[&[Window]], now: EpochMillis) -> Verdict {
    let why: Vec<String> = levels
        .iter()
        .filter_map(|windows| level_closed(windows, now))
        .collect();
    if why.is_empty() {
        return Verdict::Open;
    }
    Verdict::Closed {
        why: why.join("; "),
        opens: opens(levels, now),
    }
}

/// The first time from `at` on when every level lets runs go on.
pub fn opens(levels: &[&[Window]], mut at: EpochMillis) -> Option<EpochMillis> {
    let horizon = at.saturating_add(HORIZON_MS);
    for _ in 0..MAX_HOPS {
        if at > horizon {
            return None;
        }
        let mut moved = false;
        for windows in levels {
            let open = level_opens(windows, at)?;
            if open > at {
                at = open;
                moved = true;
            }
        }
        if !moved {
            return Some(at);
        }
    }
    None
}

/// Parses a level's written windows, each refused with its place
/// (`windows[1]`).
pub fn parse_all(specs: &[WindowSpec], now: EpochMillis) -> Result<Vec<Window>, String> {
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| Window::checked(spec, now).map_err(|why| format!("windows[{i}]: {why}")))
        .collect()
}

/// The installation's windows, as its `SyncWindows` parameter writes them
/// (`STACKSYNC_WINDOWS`): a JSON (or YAML) list of windows, each as an
/// entry's `windows:` item; empty for none.
pub fn installation_windows(text: &str, now: EpochMillis) -> Result<Vec<Window>, String> {
    let say = |why: String| format!("SyncWindows (STACKSYNC_WINDOWS): {why}");
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let specs: Vec<WindowSpec> = serde_yaml_ng::from_str(text).map_err(|e| {
        say(format!(
            "{e}: write a list of windows, like [{{\"deny\": \"0 0 24 12 *\", \"duration\": \"2d\"}}]"
        ))
    })?;
    parse_all(&specs, now).map_err(say)
}

/// Words for a closed verdict: why, and when runs go on.
pub fn describe(why: &str, opens: Option<EpochMillis>) -> String {
    match opens {
        Some(at) => format!("{why}: waits until {}", rfc3339(at)),
        None => format!("{why}: no opening found in the next five years"),
    }
}

#[cfg(test)]
mod tests;
