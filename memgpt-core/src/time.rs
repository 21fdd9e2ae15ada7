//! Time: the [`Clock`] seam and the one timestamp format the LLM sees.
//!
//! All times are UTC. Agents read "now" from a [`Clock`] so tests and replays (for example the
//! LoCoMo evaluation, whose sessions happened on specific dates) control the timestamps written
//! into messages.

use std::fmt;
use std::sync::Mutex;

use chrono::{DateTime, Duration, SecondsFormat, Utc};

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to: for tests and replays of historical conversations.
///
/// ```
/// use memgpt_core::time::{Clock, ManualClock};
/// use chrono::{Duration, TimeZone, Utc};
///
/// let clock = ManualClock::new(Utc.with_ymd_and_hms(2023, 5, 8, 13, 56, 0).unwrap());
/// clock.advance(Duration::minutes(5));
/// assert_eq!(clock.now(), Utc.with_ymd_and_hms(2023, 5, 8, 14, 1, 0).unwrap());
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Sets the time.
    pub fn set(&self, now: DateTime<Utc>) {
        *self.lock() = now;
    }

    /// Moves the time forward (or backward, for a negative duration).
    pub fn advance(&self, by: Duration) {
        let mut now = self.lock();
        *now += by;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        // A poisoned clock still holds a valid time.
        self.now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

/// Formats a timestamp the way the LLM sees it: RFC 3339, second precision, `Z` suffix.
pub fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn llm_time_format_is_compact_rfc3339() {
        let t = Utc.with_ymd_and_hms(2026, 12, 2, 12, 33, 0).unwrap();
        assert_eq!(format_time(t), "2026-12-02T12:33:00Z");
    }
}
