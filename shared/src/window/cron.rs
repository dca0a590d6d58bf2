//! Cron expressions as `crontab(5)` writes them: five fields, minute hour
//! day-of-month month day-of-week, each `*`, a value, a range `a-b`, a step
//! `*/n` or `a-b/n` or `a/n`, or a list of those; months and days by
//! number or by name (`JAN`, `MON`), Sunday as 0 or 7. As in cron, when
//! both day fields are restricted a day matching either is a match.

use jiff::civil::{Date, DateTime};

/// A parsed cron expression: each field as the set of values it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// The day of the month, or of the week, is `*`.
    any_day: bool,
    any_weekday: bool,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's name, bounds and names.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const FIELDS: [Field; 5] = [
    Field {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
    },
    Field {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
    },
    Field {
        name: "day of the month",
        min: 1,
        max: 31,
        names: &[],
    },
    Field {
        name: "month",
        min: 1,
        max: 12,
        names: &MONTHS,
    },
    Field {
        name: "day of the week",
        min: 0,
        max: 7,
        names: &WEEKDAYS,
    },
];

impl Cron {
    /// Parses `text`; the error says which field is wrong and why.
    pub fn parse(text: &str) -> Result<Self, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "{text:?} has {} field(s): a cron expression has 5, minute hour \
                 day-of-month month day-of-week (like \"0 8 * * MON-FRI\")",
                fields.len()
            ));
        }
        let mut sets = [0u64; 5];
        for (i, (field, part)) in FIELDS.iter().zip(&fields).enumerate() {
            sets[i] = field
                .parse(part)
                .map_err(|why| format!("{text:?}: the {} {part:?} {why}", field.name))?;
        }
        // Sunday is 0 and 7.
        let weekdays = (sets[4] | (sets[4] >> 7)) & 0x7f;
        Ok(Self {
            minutes: sets[0],
            hours: u32::try_from(sets[1]).unwrap_or(0),
            days: u32::try_from(sets[2]).unwrap_or(0),
            months: u16::try_from(sets[3]).unwrap_or(0),
            weekdays: u8::try_from(weekdays).unwrap_or(0),
            any_day: fields[2] == "*" || fields[2] == "?",
            any_weekday: fields[4] == "*" || fields[4] == "?",
        })
    }

    /// Whether a window may start on `date`.
    pub fn matches_day(&self, date: Date) -> bool {
        let month = u32::try_from(date.month()).unwrap_or(0);
        if self.months & (1 << month) == 0 {
            return false;
        }
        let day = self.days & (1 << u32::try_from(date.day()).unwrap_or(0)) != 0;
        let weekday = self.weekdays
            & (1 << u32::try_from(date.weekday().to_sunday_zero_offset()).unwrap_or(0))
            != 0;
        match (self.any_day, self.any_weekday) {
            (true, true) => true,
            (true, false) => weekday,
            (false, true) => day,
            (false, false) => day || weekday,
        }
    }

    /// The times of day a window starts on a matching day, earliest first.
    pub fn times_on(&self, date: Date) -> impl Iterator<Item = DateTime> + '_ {
        (0..24i8)
            .filter(|h| self.hours & (1 << h) != 0)
            .flat_map(move |h| {
                (0..60i8)
                    .filter(|m| self.minutes & (1 << m) != 0)
                    .map(move |m| date.at(h, m, 0, 0))
            })
    }
}

impl Field {
    /// The set of values `part` matches, as bits.
    fn parse(&self, part: &str) -> Result<u64, String> {
        let mut set = 0u64;
        for item in part.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((range, step)) => {
                    let step: u32 = step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        format!("has a step {step:?} that is not a whole number above 0")
                    })?;
                    (range, step)
                }
                None => (item, 1),
            };
            let (low, high) = match range {
                "*" | "?" => (self.min, self.max),
                _ => match range.split_once('-') {
                    Some((a, b)) => (self.value(a)?, self.value(b)?),
                    // `a/n`: from a to the end.
                    None if step > 1 || item.contains('/') => (self.value(range)?, self.max),
                    None => {
                        let v = self.value(range)?;
                        (v, v)
                    }
                },
            };
            if low > high {
                return Err(format!(
                    "runs from {low} down to {high}: write the smaller first"
                ));
            }
            let mut v = low;
            while v <= high {
                set |= 1 << v;
                v += step;
            }
        }
        Ok(set)
    }

    /// A number within bounds, or a name.
    fn value(&self, text: &str) -> Result<u32, String> {
        let upper = text.to_ascii_uppercase();
        if let Some(i) = self.names.iter().position(|n| *n == upper) {
            // Months count from 1, days of the week from 0.
            return Ok(u32::try_from(i).unwrap_or(0) + u32::from(self.min == 1));
        }
        match text.parse::<u32>() {
            Ok(v) if (self.min..=self.max).contains(&v) => Ok(v),
            Ok(v) => Err(format!("names {v}, outside {}-{}", self.min, self.max)),
            Err(_) if self.names.is_empty() => Err(format!("has {text:?}, which is not a number")),
            Err(_) => Err(format!(
                "has {text:?}, which is neither a number nor one of {}",
                self.names.join(", ")
            )),
        }
    }
}
